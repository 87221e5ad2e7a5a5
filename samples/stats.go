package stats

import "errors"

// Mean returns the arithmetic mean of xs.
func Mean(xs []float64) (float64, error) {
	if len(xs) == 0 {
		return 0, errors.New("empty input")
	}
	var sum float64
	for i := 0; i < len(xs); i++ {
		sum += xs[i]
	}
	return sum / float64(len(xs)), nil
}

// Max returns the largest value in xs.
func Max(xs []float64) (float64, error) {
	if len(xs) == 0 {
		return 0, errors.New("empty input")
	}
	m := xs[0]
	for i := 1; i < len(xs); i++ {
		if xs[i] > m {
			m = xs[i]
		}
	}
	return m, nil
}
