package wire

import "testing"

// TestGoldenLabels pins `avfs tag --json` and `avfs meta --json`.
func TestGoldenLabels(t *testing.T) {
	checkGolden(t, "labels", Labels{Kind: LabelsKind, Path: "/data/run.csv", Tags: []string{"raw", "reviewed"},
		Meta: map[string]string{"owner": "ops", "source": "sensor-3"}})
}
