// Which conversations are answering now, and which finished while another was shown.
// Each conversation has its own stream: several can run at once (the service holds one
// turn per conversation), and Stop ends only the one it is shown with. A turn runs on the
// service whether or not a page follows it: the list says which run (reattached on open).

class Streams {
  constructor() {
    this.live = new Map(); // conversation id -> {controller, answer}
    this.unseen = new Set(); // conversation ids whose answer ended while not shown
    this.running = new Set(); // conversation ids the service says are answering (the list's)
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

  /** What the conversation list says is answering, on the service: a turn of this page,
   * of another tab, or of this page before a reload. */
  serverRunning(ids) {
    this.running = new Set(ids);
    this.changed();
  }

  /** Answering on the service, with no stream of this page following it. */
  unfollowed(id) {
    return this.running.has(id) && !this.live.has(id);
  }

  /** "streaming", "unseen" or null, for the conversation list. */
  mark(id) {
    if (this.live.has(id) || this.running.has(id)) return "streaming";
    return this.unseen.has(id) ? "unseen" : null;
  }

  changed() {
    if (this.onChange) this.onChange();
  }
}

export const streams = new Streams();
