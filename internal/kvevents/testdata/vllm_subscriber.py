#!/usr/bin/python3
"""A KV cache event consumer on libzmq, shaped like vLLM's own subscriber.

kvevents' TestPublisherToLibzmqSubscriber runs it with Debian's python3-zmq
and python3-msgpack against narwhal's zmq4 publisher (what the simulated
engine publishes with), so that publisher is proven against the library
vLLM's consumers use.

It follows examples/features/kv_events/kv_events_subscriber.py in vLLM: a SUB
socket on the event endpoint reading (topic, seq, payload), and on a sequence
gap a replay request of last_seq + 1 as 8 big-endian bytes, answers read up to
the one with an empty payload. Where that example uses a REQ socket this uses
a DEALER (sending the empty delimiter itself), as vLLM's tests do since
vllm-project/vllm#45177: a REQ socket takes only the first answer.

It replays from 0 at start, prints {"ready": true}, then applies every batch
(BlockStored adds block_hashes, BlockRemoved removes them, AllBlocksCleared
empties the set) and answers each stdin line "report" with
{"seq": last applied sequence, "blocks": sorted hashes, "replays": count}.
It exits at the end of stdin.

vLLM's example, read at
  https://github.com/vllm-project/vllm/blob/1bd773f6a52899e189c8237e55473cda0074f2fb/examples/features/kv_events/kv_events_subscriber.py
and the replay answers' topic frame in vLLM's test_replay_includes_topic at
  https://github.com/vllm-project/vllm/blob/05d3142f485910eab6c3421d8dcf37be44d5eaca/tests/distributed/test_events.py
(the move of vLLM's test subscriber from REQ to DEALER is in the text of
https://github.com/vllm-project/vllm/pull/45177).
"""

import argparse
import json
import os
import sys

import msgpack
import zmq


class Follower:
    def __init__(self, endpoint, replay_endpoint, topic):
        ctx = zmq.Context.instance()
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt_string(zmq.SUBSCRIBE, topic)
        self.sub.connect(endpoint)
        self.replay_sock = ctx.socket(zmq.DEALER)
        self.replay_sock.connect(replay_endpoint)
        self.last_seq = -1
        self.blocks = set()
        self.replays = 0

    def apply(self, seq, payload):
        ts, events, *rest = msgpack.unpackb(payload)
        for e in events:
            if isinstance(e, dict):  # vLLM >= vllm-project/vllm#42892
                kind, hashes = e["type"], e.get("block_hashes", [])
            else:
                kind, hashes = e[0], (e[1] if len(e) > 1 else [])
            if kind == "BlockStored":
                self.blocks.update(hashes)
            elif kind == "BlockRemoved":
                self.blocks.difference_update(hashes)
            elif kind == "AllBlocksCleared":
                self.blocks.clear()
        self.last_seq = seq

    def replay(self, start):
        self.replays += 1
        self.replay_sock.send_multipart([b"", start.to_bytes(8, "big")])
        while self.replay_sock.poll(5000):
            frames = self.replay_sock.recv_multipart()
            _, _topic, seq_bytes, payload = frames  # [b"", topic, seq, payload]
            if not payload:
                return  # the end marker
            seq = int.from_bytes(seq_bytes, "big")
            if seq > self.last_seq:
                self.apply(seq, payload)
        raise SystemExit("vllm_subscriber: replay answer incomplete after 5 s")

    def live(self):
        _topic, seq_bytes, payload = self.sub.recv_multipart()
        seq = int.from_bytes(seq_bytes, "big")
        if seq <= self.last_seq:
            return
        if seq > self.last_seq + 1:
            self.replay(self.last_seq + 1)
            if seq <= self.last_seq:
                return
        self.apply(seq, payload)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--replay-endpoint", required=True)
    ap.add_argument("--topic", default="")
    args = ap.parse_args()
    f = Follower(args.endpoint, args.replay_endpoint, args.topic)
    f.replay(0)
    print(json.dumps({"ready": True}), flush=True)
    stdin = sys.stdin.fileno()
    poller = zmq.Poller()
    poller.register(f.sub, zmq.POLLIN)
    poller.register(stdin, zmq.POLLIN)
    pending = b""
    while True:
        ready = dict(poller.poll(1000))
        if f.sub in ready:
            f.live()
        if stdin in ready:
            chunk = os.read(stdin, 4096)  # not readline: see vllm_publisher.py
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line.strip() == b"report":
                    print(json.dumps({"seq": f.last_seq, "blocks": sorted(f.blocks), "replays": f.replays}), flush=True)
    f.sub.close(linger=0)
    f.replay_sock.close(linger=0)


if __name__ == "__main__":
    main()
