package openai

import "bytes"

// StripTokenIDs removes the per-token id fields the router asked the
// engine for, unless the client asked for them itself. It cuts the bytes
// rather than re-encoding the event, so everything else reaches the client
// exactly as the engine wrote it. data is not modified; the result is data
// itself when there is nothing to cut.
func StripTokenIDs(data []byte) []byte {
	if !bytes.Contains(data, []byte(`token_ids":[`)) {
		return data
	}
	return StripTokenIDsInPlace(bytes.Clone(data))
}

// StripTokenIDsInPlace is StripTokenIDs cutting inside data: the result is
// a prefix of data's array, so a relay strips its frame without
// allocating. A quoted key cannot occur inside a JSON string (its quotes
// would be escaped), and id lists hold only integers, so the first ']'
// closes the list.
func StripTokenIDsInPlace(data []byte) []byte {
	for _, key := range [][]byte{[]byte(`"token_ids":[`), []byte(`"prompt_token_ids":[`)} {
		for {
			i := bytes.Index(data, key)
			if i < 0 {
				break
			}
			j := bytes.IndexByte(data[i:], ']')
			if j < 0 {
				return data
			}
			start, end := i, i+j+1
			switch {
			case start > 0 && data[start-1] == ',':
				start--
			case end < len(data) && data[end] == ',':
				end++
			}
			data = data[:start+copy(data[start:], data[end:])]
		}
	}
	return data
}
