// Package s3fake is an in-process S3-compatible object store for tests:
// path-style buckets with PutObject (honouring If-None-Match: *),
// GetObject (with a byte Range), HeadObject, DeleteObject, DeleteObjects,
// CreateBucket and ListObjectsV2 (with each object's LastModified) — what the remote
// tier calls. It keeps objects in memory, counts the requests of each
// method and the bytes they carry, and lets a test inject faults: a status
// for chosen requests, a lost or altered object, an object's age.
package s3fake

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is a fake object store. Its zero value is not usable: call New.
type Server struct {
	// URL is the endpoint to configure clients with (http://127.0.0.1:…).
	URL string

	srv     *httptest.Server
	mu      sync.Mutex
	buckets map[string]map[string][]byte
	counts  map[string]int
	bytes   map[string]int64
	lists   map[string][2]int // by prefix: requests, keys returned
	fault   func(r *http.Request) int
	stall   func(r *http.Request) bool
	// mods holds when each object was written, by bucket + "/" + key.
	mods map[string]time.Time
}

// New starts a fake store on a loopback port with bucket created. Close
// stops it.
func New(bucket string) *Server {
	s := &Server{buckets: map[string]map[string][]byte{bucket: {}}, counts: map[string]int{}, bytes: map[string]int64{}, lists: map[string][2]int{},
		mods: map[string]time.Time{}}
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
	return s
}

// Close stops the server, cutting the connections of requests it stalls.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// CloseClientConnections drops every open connection, as a server that
// dies mid-request does.
func (s *Server) CloseClientConnections() { s.srv.CloseClientConnections() }

// Drop is the status a fault function returns to cut the connection
// instead of answering.
const Drop = -1

// SetFault makes every request for which fn returns a non-zero status fail
// with that status (or, Drop, with a cut connection) before it is handled;
// nil clears it.
func (s *Server) SetFault(fn func(r *http.Request) int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = fn
}

// SetStall makes every request for which fn returns true go unanswered, as
// a server that stopped (or a link that drops everything) leaves it: the
// connection stays open and no byte comes back until the client gives up;
// nil clears it.
func (s *Server) SetStall(fn func(r *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stall = fn
}

// Count returns how many requests of method (PUT, GET, …) succeeded.
func (s *Server) Count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[method]
}

// Bytes returns how many object bytes the requests of method (PUT, GET)
// that succeeded carried: the bodies stored, the bodies (or ranges) sent.
func (s *Server) Bytes(method string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes[method]
}

// Lists returns how many list requests (ListObjectsV2, each page one)
// asked for a prefix starting with prefix, and how many keys they
// returned in all.
func (s *Server) Lists(prefix string) (requests, keys int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, n := range s.lists {
		if strings.HasPrefix(p, prefix) {
			requests += n[0]
			keys += n[1]
		}
	}
	return requests, keys
}

// Keys returns the keys in bucket under prefix, sorted.
func (s *Server) Keys(bucket, prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.buckets[bucket] {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Object returns a copy of the object at key and whether there is one.
func (s *Server) Object(bucket, key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets[bucket][key]
	return bytes.Clone(b), ok
}

// SetObject replaces (or, with nil, removes) the object at key, as damage
// the store did not make.
func (s *Server) SetObject(bucket, key string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if data == nil {
		delete(s.buckets[bucket], key)
		delete(s.mods, bucket+"/"+key)
		return
	}
	s.buckets[bucket][key] = bytes.Clone(data)
	s.mods[bucket+"/"+key] = time.Now()
}

// SetModified sets when the object at key says it was written, as the
// listing reports it (LastModified): a test ages objects with it.
func (s *Server) SetModified(bucket, key string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mods[bucket+"/"+key] = t
}

type errorBody struct {
	XMLName xml.Name `xml:"Error"`
	Code    string   `xml:"Code"`
	Message string   `xml:"Message"`
}

func writeError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_ = xml.NewEncoder(w).Encode(errorBody{Code: code, Message: code})
}

func codeFor(status int) string {
	switch status {
	case http.StatusPreconditionFailed:
		return "PreconditionFailed"
	case http.StatusNotFound:
		return "NoSuchKey"
	case http.StatusServiceUnavailable:
		return "SlowDown"
	}
	return "InternalError"
}

// ServeHTTP handles one path-style request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	fault, stall := s.fault, s.stall
	s.mu.Unlock()
	if stall != nil && stall(r) {
		// The body read, the server notices the client leaving.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		return
	}
	if fault != nil {
		if st := fault(r); st == Drop {
			// Read part of the body, then cut the connection, as a
			// server killed mid-upload does.
			_, _ = io.CopyN(io.Discard, r.Body, 16)
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		} else if st != 0 {
			_, _ = io.Copy(io.Discard, r.Body)
			writeError(w, st, codeFor(st))
			return
		}
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	objs, ok := s.buckets[bucket]
	if !ok && !(r.Method == http.MethodPut && key == "") {
		writeError(w, http.StatusNotFound, "NoSuchBucket")
		return
	}
	ok = true
	switch {
	case r.Method == http.MethodPut && key == "":
		if objs == nil {
			s.buckets[bucket] = map[string][]byte{}
		}
	case r.Method == http.MethodGet && key == "":
		s.list(w, r, bucket, objs)
	case r.Method == http.MethodPut:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, http.StatusBadRequest, "IncompleteBody")
			return
		}
		if n, err := strconv.Atoi(r.Header.Get("Content-Length")); err == nil && n != len(body) {
			writeError(w, http.StatusBadRequest, "IncompleteBody")
			return
		}
		if _, exists := objs[key]; exists && r.Header.Get("If-None-Match") == "*" {
			writeError(w, http.StatusPreconditionFailed, "PreconditionFailed")
			return
		}
		objs[key] = body
		s.mods[bucket+"/"+key] = time.Now()
		s.bytes[r.Method] += int64(len(body))
		w.Header().Set("ETag", `"`+strconv.Itoa(len(body))+`"`)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		data, exists := objs[key]
		if !exists {
			if r.Method == http.MethodHead {
				w.WriteHeader(http.StatusNotFound)
			} else {
				writeError(w, http.StatusNotFound, "NoSuchKey")
			}
			return
		}
		status := http.StatusOK
		if rg := r.Header.Get("Range"); rg != "" && r.Method == http.MethodGet {
			// bytes=FROM-TO, or bytes=FROM- to the end.
			from, to := 0, len(data)-1
			fs, ts, _ := strings.Cut(strings.TrimPrefix(rg, "bytes="), "-")
			var err error
			if from, err = strconv.Atoi(fs); err == nil && ts != "" {
				to, err = strconv.Atoi(ts)
			}
			if err != nil || from > to || from >= len(data) {
				writeError(w, http.StatusRequestedRangeNotSatisfiable, "InvalidRange")
				return
			}
			to = min(to, len(data)-1)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(data)))
			data, status = data[from:to+1], http.StatusPartialContent
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(status)
		if r.Method == http.MethodGet {
			_, _ = w.Write(data)
			s.bytes[r.Method] += int64(len(data))
		}
	case r.Method == http.MethodDelete:
		delete(objs, key)
		delete(s.mods, bucket+"/"+key)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && key == "" && r.URL.Query().Has("delete"):
		var req struct {
			Objects []struct {
				Key string `xml:"Key"`
			} `xml:"Object"`
		}
		if err := xml.NewDecoder(r.Body).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "MalformedXML")
			return
		}
		var res struct {
			XMLName xml.Name `xml:"DeleteResult"`
			Deleted []struct {
				Key string `xml:"Key"`
			} `xml:"Deleted"`
		}
		for _, o := range req.Objects {
			delete(objs, o.Key)
			delete(s.mods, bucket+"/"+o.Key)
			res.Deleted = append(res.Deleted, struct {
				Key string `xml:"Key"`
			}{o.Key})
		}
		w.Header().Set("Content-Type", "application/xml")
		_ = xml.NewEncoder(w).Encode(res)
	default:
		ok = false
		writeError(w, http.StatusNotImplemented, "NotImplemented")
	}
	if ok {
		s.counts[r.Method]++
	}
}

type listResult struct {
	XMLName               xml.Name    `xml:"ListBucketResult"`
	Prefix                string      `xml:"Prefix"`
	KeyCount              int         `xml:"KeyCount"`
	MaxKeys               int         `xml:"MaxKeys"`
	IsTruncated           bool        `xml:"IsTruncated"`
	NextContinuationToken string      `xml:"NextContinuationToken,omitempty"`
	Contents              []listEntry `xml:"Contents"`
}

type listEntry struct {
	Key          string `xml:"Key"`
	Size         int    `xml:"Size"`
	LastModified string `xml:"LastModified,omitempty"`
}

// list answers ListObjectsV2; the continuation token is the last key
// returned.
func (s *Server) list(w http.ResponseWriter, r *http.Request, bucket string, objs map[string][]byte) {
	q := r.URL.Query()
	prefix, after := q.Get("prefix"), q.Get("continuation-token")
	if sa := q.Get("start-after"); sa > after {
		after = sa
	}
	maxKeys := 1000
	if n, err := strconv.Atoi(q.Get("max-keys")); err == nil && n > 0 && n < maxKeys {
		maxKeys = n
	}
	var keys []string
	for k := range objs {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	res := listResult{Prefix: prefix, MaxKeys: maxKeys}
	if len(keys) > maxKeys {
		keys = keys[:maxKeys]
		res.IsTruncated, res.NextContinuationToken = true, keys[len(keys)-1]
	}
	for _, k := range keys {
		res.Contents = append(res.Contents, listEntry{Key: k, Size: len(objs[k]),
			LastModified: s.mods[bucket+"/"+k].UTC().Format("2006-01-02T15:04:05.000Z")})
	}
	res.KeyCount = len(keys)
	n := s.lists[prefix]
	s.lists[prefix] = [2]int{n[0] + 1, n[1] + len(keys)}
	w.Header().Set("Content-Type", "application/xml")
	_ = xml.NewEncoder(w).Encode(res)
}
