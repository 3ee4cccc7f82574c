package recommend

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MinBytes is the smallest value Round gives: below it a limit saves nothing worth its risk
// (a container's next log lines, a volume's next temporary file).
const MinBytes = 16 << 20

// Round rounds bytes up to the ladder limits are written on: a quarter of the power of two
// below the value, so 256Mi, 320Mi, 384Mi, 448Mi, 512Mi, 640Mi, 768Mi, 896Mi, 1Gi, 1280Mi,
// 1536Mi, 1792Mi, 2Gi, 2560Mi, 3Gi, 3584Mi, 4Gi, 5Gi, 6Gi, 7Gi, 8Gi, 10Gi, ... Each step is at
// most ×1.25, and every value is a whole number of MiB (of GiB from 4Gi), as a person writes
// a Kubernetes quantity. Nothing is below MinBytes.
//
// The recording rules compute the same with the same float operations
// (rules/emptydir-guard.rules.yml, TestRulesRoundAsRound):
//
//	2 ^ (floor(log2(clamp_min(x, MinBytes))) - 2) * ceil(clamp_min(x, MinBytes) / 2 ^ (floor(log2(clamp_min(x, MinBytes))) - 2))
func Round(bytes float64) float64 {
	x := math.Max(bytes, MinBytes)
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	q := math.Pow(2, math.Floor(math.Log2(x))-2)
	return q * math.Ceil(x/q)
}

// Format writes bytes as a Kubernetes quantity in binary units, as kubectl prints one
// (1280Mi, 2Gi); values off the ladder (a current limit a user set) keep their exact bytes.
func Format(bytes float64) string {
	if math.IsNaN(bytes) || math.IsInf(bytes, 0) || bytes < 0 || bytes > math.MaxInt64 {
		return "?"
	}
	return resource.NewQuantity(int64(math.Ceil(bytes)), resource.BinarySI).String()
}
