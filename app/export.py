"""A conversation as Markdown: readable anywhere, sources as links."""

from __future__ import annotations

from typing import Any


def markdown(conversation: dict[str, Any]) -> str:
    lines = [f"# {conversation.get('title') or 'Conversation'}", ""]
    settings = conversation.get("settings", {})
    lines += [
        f"- exported from conversation `{conversation.get('id', '')}`, "
        f"created {str(conversation.get('created', ''))[:19].replace('T', ' ')} UTC",
        f"- model: {settings.get('model') or 'default'}; "
        f"search locale: {settings.get('search_locale', 'all')}",
        "",
    ]
    if conversation.get("summary"):
        lines += ["## Summary of earlier messages", "", conversation["summary"], ""]
    for message in conversation.get("messages", []):
        lines += message_lines(message)
    return "\n".join(lines).rstrip() + "\n"


def message_lines(message: dict[str, Any]) -> list[str]:
    if message.get("role") == "user":
        quoted = "\n".join(f"> {line}" if line else ">" for line in message["content"].split("\n"))
        return ["## You", "", quoted, ""]
    status = message.get("status", "complete")
    heading = f"## Assistant ({message.get('model', '')})"
    if status != "complete":
        heading += f" — {status}"
    lines = [heading, ""]
    for step in message.get("activity", []):
        if step.get("type") == "search":
            lines.append(f"- searched: {step.get('query', '')} ({step.get('language', '')})")
        elif step.get("type") == "fetch":
            lines.append(f"- read: [{step.get('title') or step.get('url')}]({step.get('url')})")
    if message.get("activity"):
        lines.append("")
    lines += [message.get("content", ""), ""]
    error = message.get("error")
    if error:
        lines += [f"*Error ({error.get('kind')}): {error.get('message')}*", ""]
    sources = message.get("sources", [])
    if sources:
        lines += ["Sources:", ""]
        for number, source in enumerate(sources, 1):
            title = (source.get("title") or source.get("url", "")).replace("]", "\\]")
            lines.append(f"{number}. [{title}]({source.get('url', '')})")
        lines.append("")
    return lines
