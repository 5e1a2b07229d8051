// Building DOM nodes. Text always goes in through textContent: nothing here parses HTML.

/**
 * el("a", {className: "chip", href, text: "x", on: {click}}, child, ...)
 * Keys: className, text, on (event listeners), dataset, hidden; anything else is set as an
 * attribute. Children may be nodes, strings (as text) or null.
 */
export function el(tag, props = {}, ...children) {
  return build(document.createElement(tag), props, children);
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(tag, props = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), props, children);
}

function build(node, props, children) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "className") node.setAttribute("class", value);
    else if (key === "text") node.textContent = String(value);
    else if (key === "on") for (const [type, fn] of Object.entries(value)) node.addEventListener(type, fn);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "hidden") node.hidden = Boolean(value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, ...children);
  return node;
}

export function append(node, ...children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function $(selector, root = document) {
  return root.querySelector(selector);
}
