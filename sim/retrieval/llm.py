"""The LLM scorer's transport: request bodies POSTed to an OpenAI-compatible endpoint."""

from __future__ import annotations

import json
import urllib.request

from nodes.scoring import ChatTransport


def openai_transport(url: str, api_key: str | None = None, timeout: float = 60.0
                     ) -> ChatTransport:
    """POST request bodies to an OpenAI-compatible ``…/chat/completions`` endpoint."""
    endpoint = url.rstrip("/")
    if not endpoint.endswith("/chat/completions"):
        endpoint += "/chat/completions"

    def chat(body: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        req = urllib.request.Request(endpoint, json.dumps(body).encode(), headers, method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            reply: dict = json.loads(resp.read().decode("utf-8"))
            return reply

    return chat
