package wire

import "testing"

// TestGoldenLabels pins `avfs tag --json` and `avfs meta --json`.
func TestGoldenLabels(t *testing.T) {
	checkGolden(t, "labels", Labels{Kind: LabelsKind, Path: "/data/run.csv", Tags: []string{"raw", "reviewed"},
		Meta: map[string]string{"owner": "ops", "source": "sensor-3"}})
	checkGolden(t, "labels_raw_name", Labels{Kind: LabelsKind, Path: "/data/\xff\xfe.csv", PathB64: B64("/data/\xff\xfe.csv"), Tags: []string{"raw"},
		Meta: map[string]string{}})
}
