package simengine

// Output tokens are a pure function of the KV content and the position:
// the KV digest is a hash of the model name and the prompt's token ids, so
// an aggregated run and a disaggregated run (prefill on A, decode on B
// with A's KV) produce the same text, while a corrupted transfer (a
// different digest) produces different text.

// vocab holds the words the simulated model says. Each is at most three
// letters, so " word" is exactly one token of the simulated tokenizer and
// the text the engine returns re-tokenizes to the count it reports.
var vocab = [...]string{
	"the", "a", "of", "to", "and", "in", "is", "it", "you", "not", "he", "was", "for", "on", "are", "as",
	"his", "yet", "at", "be", "one", "has", "had", "by", "hot", "but", "we", "can", "out", "use", "an", "all",
	"she", "do", "how", "if", "up", "so", "her", "may", "him", "see", "two", "way", "who", "its", "now", "day",
	"did", "get", "man", "new", "old", "sea", "sky", "sun", "red", "big", "low", "far", "run", "own", "set", "yes",
}

// KVDigest is the fingerprint of a prompt's KV on a model.
func KVDigest(model string, ids []int64) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(model); i++ {
		h = (h ^ uint64(model[i])) * 1099511628211
	}
	h = mix(h)
	for _, id := range ids {
		h = mix(h ^ uint64(id))
	}
	return h
}

// TokenText is output token i (from 0) for KV digest d: a space and a word.
func TokenText(d uint64, i int) string {
	return " " + vocab[mix(d+uint64(i)*0x9e3779b97f4a7c15)%uint64(len(vocab))]
}

// mix is splitmix64's finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}
