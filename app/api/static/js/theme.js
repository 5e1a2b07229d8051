// Light, dark or as the system says: the choice is kept in this browser only.

const KEY = "theme";
const CHOICES = ["system", "light", "dark"];

function apply(choice) {
  if (choice === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = choice;
}

/** Wire the theme <select>; the choice applies at once and on the next visit. */
export function bindTheme(select) {
  let saved = "system";
  try {
    saved = localStorage.getItem(KEY) || "system";
  } catch {
    // storage refused (private mode): the system's scheme it is
  }
  if (!CHOICES.includes(saved)) saved = "system";
  select.value = saved;
  apply(saved);
  select.addEventListener("change", () => {
    apply(select.value);
    try {
      localStorage.setItem(KEY, select.value);
    } catch {
      // not kept, but applied for this visit
    }
  });
}
