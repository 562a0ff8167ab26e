package remote

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/wsstore/wsstore/wserr"
)

// Location names where a remote tier keeps its objects, as an s3:// URL
// gives it: s3://BUCKET/PREFIX?endpoint=URL&region=NAME&profile=NAME.
// Without an endpoint the SDK's AWS default applies; with one, requests
// are path-style (what S3-compatible servers expect).
type Location struct {
	Bucket string
	// Prefix is prepended to every key; empty, or ending in "/".
	Prefix   string
	Endpoint string
	Region   string
	// Profile names a profile of the shared AWS config and credentials
	// files; empty means AWS_PROFILE or "default".
	Profile string
}

// regionPattern is the form of a region's name (us-east-1, auto).
var regionPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ParseURL parses an s3:// URL into a Location. It fails with
// store.invalid_options for another scheme, a missing bucket, an
// endpoint that is not an http(s) URL with a host, a region that is not
// a name, or an unknown query parameter.
func ParseURL(s string) (Location, error) { return parseURL(s, true) }

// parseURL is ParseURL; strict unset, it takes any region, as a URL a
// store recorded before regions were checked may hold (the tier it names
// is the same whatever the region).
func parseURL(s string, strict bool) (Location, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Location{}, wserr.Wrap(wserr.InvalidOptions, "remote url", s, err)
	}
	if u.Scheme != "s3" {
		return Location{}, wserr.New(wserr.InvalidOptions, "remote url", s, "scheme %q: want s3://bucket/prefix", u.Scheme)
	}
	if u.Host == "" {
		return Location{}, wserr.New(wserr.InvalidOptions, "remote url", s, "no bucket: want s3://bucket/prefix")
	}
	loc := Location{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	if loc.Prefix != "" {
		loc.Prefix += "/"
	}
	for k, v := range u.Query() {
		switch k {
		case "endpoint":
			loc.Endpoint = v[0]
			if e, err := url.Parse(loc.Endpoint); err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
				return Location{}, wserr.New(wserr.InvalidOptions, "remote url", s, "endpoint %q: want http://host[:port] or https://host[:port]", loc.Endpoint)
			}
		case "region":
			loc.Region = v[0]
			if strict && !regionPattern.MatchString(loc.Region) {
				return Location{}, wserr.New(wserr.InvalidOptions, "remote url", s, "region %q: want a name of letters, digits, '-' or '_'", loc.Region)
			}
		case "profile":
			loc.Profile = v[0]
		default:
			return Location{}, wserr.New(wserr.InvalidOptions, "remote url", s, "unknown parameter %q (want endpoint, region, profile)", k)
		}
	}
	return loc, nil
}

// String returns the location as an s3:// URL.
func (l Location) String() string {
	u := url.URL{Scheme: "s3", Host: l.Bucket, Path: "/" + strings.TrimSuffix(l.Prefix, "/")}
	q := url.Values{}
	if l.Endpoint != "" {
		q.Set("endpoint", l.Endpoint)
	}
	if l.Region != "" {
		q.Set("region", l.Region)
	}
	if l.Profile != "" {
		q.Set("profile", l.Profile)
	}
	u.RawQuery = q.Encode()
	return u.String()
}
