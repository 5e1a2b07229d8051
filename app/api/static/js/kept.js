// Whose things this browser keeps in its storage (drafts, research defaults): in household
// mode each person's under their name, so someone else signing in on the same browser
// finds their own, not the last person's. The theme alone is the browser's.

let owner = "";

/** Whose from now on: a household's person (their name), or null for the one user. */
export function keepFor(person) {
  owner = person ? `person:${encodeURIComponent(person)}:` : "";
}

/** The storage key of `name` for the person using the page. */
export function keyOf(name) {
  return owner + name;
}
