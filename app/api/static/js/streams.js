// Which conversations are answering now, and which finished while another was shown.
// Each conversation has its own stream: several can run at once (the service holds one
// turn per conversation), and Stop ends only the one it is shown with.

class Streams {
  constructor() {
    this.live = new Map(); // conversation id -> {controller, answer}
    this.unseen = new Set(); // conversation ids whose answer ended while not shown
    this.onChange = null; // main.js redraws the sidebar's marks
  }

  get(id) {
    return (id && this.live.get(id)) || null;
  }

  start(id, stream) {
    this.live.set(id, stream);
    this.unseen.delete(id);
    this.changed();
  }

  /** The stream ended; `seen`: its conversation was on screen when it did. */
  end(id, seen) {
    this.live.delete(id);
    if (!seen) this.unseen.add(id);
    this.changed();
  }

  seen(id) {
    if (this.unseen.delete(id)) this.changed();
  }

  /** "streaming", "unseen" or null, for the conversation list. */
  mark(id) {
    if (this.live.has(id)) return "streaming";
    return this.unseen.has(id) ? "unseen" : null;
  }

  changed() {
    if (this.onChange) this.onChange();
  }
}

export const streams = new Streams();
