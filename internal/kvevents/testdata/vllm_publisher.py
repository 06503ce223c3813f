#!/usr/bin/python3
"""A KV cache event publisher on libzmq, shaped like vLLM's ZmqEventPublisher.

kvevents' interop test (interop_test.go) runs it with Debian's python3-zmq
(pyzmq over libzmq, what vLLM publishes with) and python3-msgpack, so
narwhal's zmq4 subscriber is proven against the real library rather than
against narwhal's own publisher.

What it copies from vllm/distributed/kv_events.py (ZmqEventPublisher):
  - a PUB socket sending (topic, seq, payload), seq as seq.to_bytes(8, "big")
    from 0 on, payload the msgpack EventBatch;
  - a ROUTER socket answering [identity, b"", start_seq] with every buffered
    batch from start_seq on, then an end marker with END_SEQ (-1 as 8 signed
    big-endian bytes); with --format map each answer carries the topic
    (vLLM >= 0.26, vllm-project/vllm#45177), with --format array it does not;
  - the batch [ts, events, data_parallel_rank]; each event a tagged map
    {"type": ..., field: ...} with --format map (vllm-project/vllm#42892),
    a positional array [tag, field...] in declaration order with --format array.

It binds both sockets on 127.0.0.1, on ephemeral ports unless --pub-port and
--replay-port name them (an engine restarting on its ports), and prints them
as one JSON line. It then reads commands on stdin, one a line, and answers each with one
JSON line {"seq": last published sequence, "blocks": sorted resident hashes}:
  live N   publish N batches of random stores and removals
  drop N   make N such batches and keep them for replay, but send none of them
           on the PUB socket (what a subscriber sees when PUB drops at its
           high-water mark)
  clear    publish a batch with AllBlocksCleared
It services replay requests between commands, and exits at the end of stdin.

Read from vLLM's own files (the same as internal/kvevents/wire.go and
replay.go cite):
  https://github.com/vllm-project/vllm/blob/0181ea3173e53eea8cf04a86891488e3dc89bb34/vllm/distributed/kv_events.py
  https://github.com/vllm-project/vllm/blob/b4e69e0af33f4698e157a262cc787fe61983cd3d/vllm/distributed/kv_events.py
  https://github.com/vllm-project/vllm/blob/1bd773f6a52899e189c8237e55473cda0074f2fb/examples/features/kv_events/kv_events_subscriber.py
"""

import argparse
import collections
import json
import os
import random
import sys
import time

import msgpack
import zmq

END_SEQ = (-1).to_bytes(8, "big", signed=True)
BLOCK_SIZE = 16


def bind(sock, port):
    """Binds on 127.0.0.1: port, or an ephemeral port when 0."""
    if port == 0:
        return sock.bind_to_random_port("tcp://127.0.0.1")
    sock.bind(f"tcp://127.0.0.1:{port}")
    return port


class Publisher:
    def __init__(self, fmt, topic, seed, buffer_steps, pub_port=0, replay_port=0):
        ctx = zmq.Context.instance()
        self.pub = ctx.socket(zmq.PUB)
        self.pub.set_hwm(100_000)
        self.pub_port = bind(self.pub, pub_port)
        self.router = ctx.socket(zmq.ROUTER)
        self.router_port = bind(self.router, replay_port)
        self.fmt = fmt
        self.topic = topic.encode("utf-8")
        self.rng = random.Random(seed)
        self.buffer = collections.deque(maxlen=buffer_steps)
        self.seq = -1
        self.blocks = []  # resident hashes, in the order stored

    def stored(self, hashes, parent, tokens):
        if self.fmt == "map":
            # Declared without a default, so always sent: lora_id, medium,
            # lora_name. group_idx is set by vLLM's scheduler.
            return {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent,
                    "token_ids": tokens, "block_size": BLOCK_SIZE, "lora_id": None,
                    "medium": "GPU", "lora_name": None, "extra_keys": [None] * len(hashes),
                    "group_idx": 0, "kv_cache_spec_kind": "full_attention"}
        return ["BlockStored", hashes, parent, tokens, BLOCK_SIZE, None, "GPU", None]

    def removed(self, hashes):
        if self.fmt == "map":
            return {"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU", "group_idx": 0}
        return ["BlockRemoved", hashes, "GPU"]

    def cleared(self):
        return {"type": "AllBlocksCleared"} if self.fmt == "map" else ["AllBlocksCleared"]

    def step(self):
        """One engine step: a new chain of 1 to 3 blocks, maybe a removal."""
        events = []
        n = self.rng.randint(1, 3)
        # Hashes span the whole uint64 range: msgpack's uint64 form included.
        hashes = [self.rng.getrandbits(64) for _ in range(n)]
        parent = self.rng.choice(self.blocks) if self.blocks and self.rng.random() < 0.5 else None
        tokens = [self.rng.randrange(128_256) for _ in range(n * BLOCK_SIZE)]
        events.append(self.stored(hashes, parent, tokens))
        self.blocks.extend(hashes)
        if len(self.blocks) > 4 and self.rng.random() < 0.7:
            gone = self.rng.sample(self.blocks, self.rng.randint(1, 2))
            events.append(self.removed(gone))
            self.blocks = [h for h in self.blocks if h not in gone]
        return events

    def publish(self, events, send):
        self.seq += 1
        payload = msgpack.packb([time.time(), events, 0])
        if send:
            self.pub.send_multipart((self.topic, self.seq.to_bytes(8, "big"), payload))
        self.buffer.append((self.seq, payload))

    def service_replay(self):
        frames = self.router.recv_multipart()
        if len(frames) != 3:
            return  # vLLM logs "Invalid replay request" and ignores it
        client_id, _, start_seq_bytes = frames
        start_seq = int.from_bytes(start_seq_bytes, "big")
        for seq, payload in self.buffer:
            if seq >= start_seq:
                head = [client_id, b""] + ([self.topic] if self.fmt == "map" else [])
                self.router.send_multipart(head + [seq.to_bytes(8, "big"), payload])
        end = [client_id, b""] + ([b""] if self.fmt == "map" else [])
        self.router.send_multipart(end + [END_SEQ, b""])

    def command(self, line):
        words = line.split()
        if words[0] in ("live", "drop"):
            for _ in range(int(words[1])):
                self.publish(self.step(), send=words[0] == "live")
        elif words[0] == "clear":
            self.blocks = []
            self.publish([self.cleared()], send=True)
        else:
            raise SystemExit(f"vllm_publisher: unknown command {line!r}")
        return {"seq": self.seq, "blocks": sorted(self.blocks)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--format", choices=("map", "array"), default="map")
    ap.add_argument("--topic", default="kv-events")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--buffer-steps", type=int, default=10_000)
    ap.add_argument("--pub-port", type=int, default=0, help="0: an ephemeral port")
    ap.add_argument("--replay-port", type=int, default=0, help="0: an ephemeral port")
    args = ap.parse_args()
    p = Publisher(args.format, args.topic, args.seed, args.buffer_steps, args.pub_port, args.replay_port)
    print(json.dumps({"endpoint": f"tcp://127.0.0.1:{p.pub_port}",
                      "replay_endpoint": f"tcp://127.0.0.1:{p.router_port}"}), flush=True)
    stdin = sys.stdin.fileno()
    poller = zmq.Poller()
    poller.register(p.router, zmq.POLLIN)
    poller.register(stdin, zmq.POLLIN)
    pending = b""
    while True:
        ready = dict(poller.poll(1000))
        if p.router in ready:
            p.service_replay()
        if stdin in ready:
            # os.read, not readline: a line already in a file buffer would
            # not wake the poller.
            chunk = os.read(stdin, 4096)
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line.strip():
                    print(json.dumps(p.command(line.decode())), flush=True)
    p.pub.close(linger=0)
    p.router.close(linger=0)


if __name__ == "__main__":
    main()
