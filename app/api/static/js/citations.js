// A citation [n] is a place in the page, not an address: clicking it scrolls to its source
// (opening the list of results seen when it is there) and highlights it. The conversation
// shown never changes, also while the answer streams.

const FLASH_MS = 1600;

export function bindCitations(container) {
  container.addEventListener("click", (event) => {
    const link = event.target.closest("a.citation");
    if (!link || !link.getAttribute("href").startsWith("#")) return;
    event.preventDefault();
    showSource(container, link.getAttribute("href").slice(1));
  });
}

function showSource(container, id) {
  const target = container.querySelector(`[id="${CSS.escape(id)}"]`);
  if (!target) return; // streaming: the sources come with the answer's end
  const list = target.closest("details");
  if (list) list.open = true;
  target.scrollIntoView({ block: "center", behavior: matchMedia("(prefers-reduced-motion: reduce)").matches ? "auto" : "smooth" });
  // One source lit at a time: the one cited last.
  for (const lit of container.querySelectorAll(".flash")) lit.classList.remove("flash");
  void target.offsetWidth; // restart the highlight when the same source is clicked again
  target.classList.add("flash");
  setTimeout(() => target.classList.remove("flash"), FLASH_MS);
}
