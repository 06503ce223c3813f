package sched

// grid is a table on two small non-negative ints (octave classes: a
// length's octave8 is at most 504), its rows grown on demand. It answers
// what a map on the pair would, without hashing the key per lookup.
type grid[T any] struct{ rows [][]T }

// at is the cell (a, b), zero until written. The pointer is valid until
// the next at with a longer row for a or a new a beyond the rows.
func (g *grid[T]) at(a, b int) *T {
	if a >= len(g.rows) {
		g.rows = append(g.rows, make([][]T, a+1-len(g.rows))...)
	}
	row := g.rows[a]
	if b >= len(row) {
		row = append(row, make([]T, b+1-len(row))...)
		g.rows[a] = row
	}
	return &row[b]
}
