package replicate

import (
	"strings"
	"testing"

	lss3 "github.com/benbjohnson/litestream/s3"

	"avfs/wire"
)

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		code     wire.Code
	}{
		{"/srv/replicas/w/", "/srv/replicas/w", ""},
		{"file:///srv/replicas/w", "/srv/replicas/w", ""},
		{"s3://bucket/avfs/w", "s3://bucket/avfs/w", ""},
		{"s3://bucket/w?endpoint=http://127.0.0.1:7070&region=eu", "s3://bucket/w?endpoint=http://127.0.0.1:7070&region=eu", ""},
		{"", "", wire.CodeInvalidInput},
		{"replicas/w", "", wire.CodeInvalidInput},
		{"file://host/srv", "", wire.CodeInvalidInput},
		{"s3://bucket", "", wire.CodeInvalidInput},
		{"s3:///w", "", wire.CodeInvalidInput},
		{"s3://AKIA:secret@bucket/w", "", wire.CodeInvalidInput},
		{"s3://bucket/w?sse-customer-key=x", "", wire.CodeInvalidInput},
		{"gs://bucket/w", "", wire.CodeInvalidInput},
	} {
		got, err := CheckURL(tc.in)
		if tc.code != "" {
			if !wire.HasCode(err, tc.code) {
				t.Errorf("CheckURL(%q) = %q, %v; want %s", tc.in, got, err, tc.code)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("CheckURL(%q): the error shows the secret: %v", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CheckURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestS3Client: the URL's endpoint and region override the config's; an
// endpoint means path-style addressing unless the config says otherwise;
// the credentials are the config's.
func TestS3Client(t *testing.T) {
	no := false
	for _, tc := range []struct {
		name      string
		target    Target
		endpoint  string
		region    string
		pathStyle bool
	}{
		{"aws", Target{URL: "s3://b/p", S3: S3{Region: "eu-west-1"}}, "", "eu-west-1", false},
		{"config endpoint", Target{URL: "s3://b/p", S3: S3{Endpoint: "127.0.0.1:7070"}}, "http://127.0.0.1:7070", "", true},
		{"URL overrides", Target{URL: "s3://b/p?endpoint=https://s3.example.net&region=x1", S3: S3{Endpoint: "http://other", Region: "y"}}, "https://s3.example.net", "x1", true},
		{"virtual-hosted", Target{URL: "s3://b/p", S3: S3{Endpoint: "https://s3.example.net", ForcePathStyle: &no}}, "https://s3.example.net", "", false},
	} {
		tc.target.S3.AccessKeyID, tc.target.S3.SecretAccessKey = "AK", "SK"
		c, err := client(tc.target)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		s3c := c.(*lss3.ReplicaClient)
		if s3c.Bucket != "b" || s3c.Path != "p" || s3c.Endpoint != tc.endpoint || s3c.Region != tc.region || s3c.ForcePathStyle != tc.pathStyle ||
			s3c.AccessKeyID != "AK" || s3c.SecretAccessKey != "SK" {
			t.Errorf("%s: bucket %q path %q endpoint %q region %q path-style %v", tc.name, s3c.Bucket, s3c.Path, s3c.Endpoint, s3c.Region, s3c.ForcePathStyle)
		}
	}
}
