package bucket

import "math"

func abs(x float64) float64 { return math.Abs(x) }
func log(x float64) float64 { return math.Log(x) }
