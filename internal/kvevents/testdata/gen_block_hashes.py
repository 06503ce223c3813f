# Generates block_hashes.json: vLLM's default prefix-cache block hashes
# computed with CPython's own pickle and hashlib, following vLLM's
# published algorithm:
#   https://github.com/vllm-project/vllm/blob/main/vllm/v1/core/kv_cache_utils.py
#     init_none_hash: NONE_HASH = hash_fn(os.getenv("PYTHONHASHSEED"))
#     hash_block_tokens: hash_fn((parent_block_hash or NONE_HASH,
#                                 tuple(curr_block_token_ids), extra_keys))
#     maybe_convert_block_hash: int.from_bytes(h, "big") & ((1 << 64) - 1)
#   https://github.com/vllm-project/vllm/blob/main/vllm/utils/hashing.py
#     sha256(x) = hashlib.sha256(pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)).digest()
# Run: python3 internal/kvevents/testdata/gen_block_hashes.py > internal/kvevents/testdata/block_hashes.json
import hashlib
import json
import pickle
import sys


def sha256(x):
    return hashlib.sha256(pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def chain(seed, tokens, block_size):
    parent = sha256(seed)
    out = []
    for i in range(len(tokens) // block_size):
        parent = sha256((parent, tuple(tokens[i * block_size:(i + 1) * block_size]), None))
        out.append(parent)
    return out


CASES = [
    ("small ids", "0", 16, list(range(40))),
    ("ids over 255 and 65535", "42", 16, [7, 300, 70000, 128000, 151643] * 7),
    ("simengine tokenizer ids over 2^31", "0", 16, [(3 << 32) | 0x48656C6C, (1 << 32) | 0x20, 2**40 + 5, 17] * 8),
    ("block size 4", "narwhal", 4, list(range(1000, 1010))),
    ("block size 2 (tuple2)", "0", 2, [1, 2, 3, 4, 5]),
    ("block size 1 (tuple1)", "0", 1, [9, 65536]),
]

vectors = []
for name, seed, bs, toks in CASES:
    hs = chain(seed, toks, bs)
    vectors.append({
        "name": name, "seed": seed, "block_size": bs, "tokens": toks,
        "none_hash": sha256(seed).hex(),
        "hashes": [h.hex() for h in hs],
        "external": [int.from_bytes(h, "big") & ((1 << 64) - 1) for h in hs],
    })
json.dump({"python": sys.version.split()[0], "algo": "sha256", "vectors": vectors}, sys.stdout, separators=(",", ":"))
print()
