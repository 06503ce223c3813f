"""A vLLM-shaped engine for narwhal's transport test, served by uvicorn.

vLLM's API server is uvicorn; this ASGI app answers the two legs the way
vLLM's OpenAI server does on the wire (a JSON producer answer with
Content-Length, a chunked SSE stream ending in [DONE]) so that
TestH1AgainstUvicorn exercises narwhal's HTTP/1.1 transport against
uvicorn's own framing, keep-alive and idle closing. It also remembers the
client port of every request (GET /ports) so the test can count
connections.

Run: python3 uvicorn_engine.py HTTP_IMPL KEEPALIVE_S with a listening TCP
socket as fd 3. Like vLLM, it hands uvicorn a socket object: uvicorn's own
--fd takes the descriptor for a Unix socket, and its connections then keep
Nagle's algorithm on (40 ms stalls against a delayed ACK).
"""

import asyncio
import json
import socket
import sys

import uvicorn

PORTS = []


async def read_body(receive):
    body = b""
    while True:
        msg = await receive()
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            return body


async def lifespan(receive, send):
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def compact(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


async def answer_json(send, obj, status=200):
    body = compact(obj)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def stream(send, req):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream; charset=utf-8")]})
    n = req.get("max_tokens", 4)
    for i in range(n):
        event = {"id": "cmpl-" + req.get("rid", "x"), "object": "text_completion", "created": 1,
                 "model": req.get("model"),
                 "choices": [{"index": 0, "text": " t%d" % i, "logprobs": None,
                              "finish_reason": "length" if i == n - 1 else None,
                              "stop_reason": None, "token_ids": [100 + i]}],
                 "usage": None}
        await send({"type": "http.response.body", "body": b"data: " + compact(event) + b"\n\n",
                    "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": True})
    # Starlette's StreamingResponse (vLLM's) ends with an empty message of
    # its own: the chunked terminator leaves in a write after [DONE].
    await asyncio.sleep(0.003)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    raw = await read_body(receive)
    if scope["path"] == "/ports":
        await answer_json(send, PORTS)
        return
    PORTS.append(scope["client"][1])
    req = json.loads(raw or b"{}")
    if scope["path"] != "/v1/completions":
        await answer_json(send, {"detail": "Not Found"}, status=404)
    elif req.get("stream"):
        await stream(send, req)
    else:
        await answer_json(send, {
            "id": "cmpl-p", "object": "text_completion", "created": 1, "model": req.get("model"),
            "choices": [{"index": 0, "text": " t", "logprobs": None, "finish_reason": "length",
                         "stop_reason": None}],
            "usage": {"prompt_tokens": 4, "total_tokens": 5, "completion_tokens": 1},
            "kv_transfer_params": {"do_remote_prefill": True, "do_remote_decode": False,
                                   "remote_block_ids": [1, 2], "remote_engine_id": "e1",
                                   "remote_host": "127.0.0.1", "remote_port": 5600},
        })


if __name__ == "__main__":
    sock = socket.socket(fileno=3)  # family and type from the descriptor
    config = uvicorn.Config(app, http=sys.argv[1], timeout_keep_alive=int(sys.argv[2]),
                            log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
