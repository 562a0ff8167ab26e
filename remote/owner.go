package remote

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// sourceKey is the meta key of the device id a store was restored from
// (ResetDevice records it), by which a restored copy knows the replica
// of its source as its own to continue.
const sourceKey = "remote.replica.source"

// OwnerKey is the key, under a replica's prefix, of the object naming the
// store that replicates there.
const OwnerKey = "owner.json"

// ReplicaOwner is the store that replicates to a replica URL, as the
// replica's owner object names it: {"version":1,"device",…}. Device is
// what tells stores apart; the rest is for the people reading an error.
type ReplicaOwner struct {
	// Device is the store's device id (Device): the same for the store
	// wherever it is moved, new for a store restored from a replica.
	Device string `json:"device"`
	// Source is the device the store was restored from, if it was.
	Source string `json:"source,omitempty"`
	// Host and Store are the host name and the store's directory where
	// replication last claimed the replica.
	Host  string `json:"host,omitempty"`
	Store string `json:"store,omitempty"`
}

// ownerObject is the owner object's encoding.
type ownerObject struct {
	Version int `json:"version"`
	ReplicaOwner
}

// String names the owner for a message: its device, and where it was.
func (o ReplicaOwner) String() string {
	s := "device " + o.Device
	switch {
	case o.Host != "" && o.Store != "":
		s += " (" + o.Store + " on " + o.Host + ")"
	case o.Store != "":
		s += " (" + o.Store + ")"
	}
	return s
}

// ReplicaOwnerOf returns the store of db as a replica's owner object
// names it: its device id, made and recorded on first use as Device
// does (the one write it makes, once in the store's life), the device it
// was restored from, this host's name and the store's directory.
func ReplicaOwnerOf(ctx context.Context, db *index.DB) (ReplicaOwner, error) {
	dev, err := Device(ctx, db)
	if err != nil {
		return ReplicaOwner{}, err
	}
	src, _, err := setting(ctx, db, sourceKey)
	if err != nil {
		return ReplicaOwner{}, err
	}
	host, _ := os.Hostname()
	dir, _ := filepath.Abs(filepath.Dir(db.Path()))
	return ReplicaOwner{Device: dev, Source: src, Host: host, Store: dir}, nil
}

// Claim is a replica URL claimed for one store by ClaimReplica.
type Claim struct {
	b   *s3Bucket
	url string
	me  ReplicaOwner
}

// ClaimReplica claims the replica at url for the store me before it
// replicates there, by the owner object under the URL's prefix: none
// there, it writes one naming me (write-once, so of two stores starting
// at once one wins); one naming me, it goes on; one naming the device me
// was restored from, it names me instead, for a restored store continues
// its source's replica (and its source, if still replicating there, is
// refused from then on). One naming any other device is store.conflict,
// naming both, and nothing at url is changed, unless takeOver: then the
// owner object is replaced and the store replicates there from now on.
// It fails with store.invalid_options for a bad URL or me without a
// device, and store.busy when the object store cannot be reached.
func ClaimReplica(ctx context.Context, url string, me ReplicaOwner, takeOver bool) (*Claim, error) {
	if me.Device == "" {
		return nil, wserr.New(wserr.InvalidOptions, "replicate", url, "no device id for the owner object (remote.ReplicaOwnerOf)")
	}
	loc, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	b, err := newS3Bucket(ctx, loc, Options{}.withDefaults())
	if err != nil {
		return nil, err
	}
	c := &Claim{b: b, url: url, me: me}
	// A round lost to another store writing the object between our read
	// and write is read again: a third loss in a row is that store's.
	for range 3 {
		cur, found, err := c.owner(ctx)
		switch {
		case err != nil:
			return nil, err
		case !found:
		case cur.Device == me.Device:
			return c, nil
		case cur.Device == me.Source && me.Source != "", takeOver:
			// What stands is replaced: removed, then written once, so a
			// store claiming the URL meanwhile keeps it.
			if err := b.remove(ctx, OwnerKey); err != nil {
				return nil, err
			}
		default:
			return nil, c.conflict(cur)
		}
		data, err := json.Marshal(ownerObject{Version: 1, ReplicaOwner: me})
		if err != nil {
			return nil, err
		}
		wrote, err := b.put(ctx, OwnerKey, data)
		if err != nil || wrote {
			return c, err
		}
	}
	cur, _, err := c.owner(ctx)
	if err != nil {
		return nil, err
	}
	return nil, c.conflict(cur)
}

// Check reads the owner object again and fails with store.conflict when
// it names another store now (one that took the replica over, or a copy
// restored from it that continues it), store.busy when the object store
// cannot be reached. A missing owner object (removed by hand) is written
// again.
func (c *Claim) Check(ctx context.Context) error {
	cur, found, err := c.owner(ctx)
	switch {
	case err != nil:
		return err
	case !found:
		data, err := json.Marshal(ownerObject{Version: 1, ReplicaOwner: c.me})
		if err != nil {
			return err
		}
		if wrote, err := c.b.put(ctx, OwnerKey, data); err != nil || wrote {
			return err
		}
		// Another store wrote it between the two.
		if cur, _, err = c.owner(ctx); err != nil {
			return err
		}
		if cur.Device != c.me.Device {
			return c.conflict(cur)
		}
	case cur.Device != c.me.Device:
		return c.conflict(cur)
	}
	return nil
}

// owner reads the owner object, if there is one.
func (c *Claim) owner(ctx context.Context) (ReplicaOwner, bool, error) {
	data, err := readSmall(ctx, c.b, OwnerKey)
	switch {
	case errors.Is(err, ErrMissing):
		return ReplicaOwner{}, false, nil
	case err != nil && !errors.Is(err, errTooLarge):
		return ReplicaOwner{}, false, err
	}
	var o ownerObject
	if err != nil || json.Unmarshal(data, &o) != nil || o.Version != 1 || o.Device == "" {
		return ReplicaOwner{}, false, wserr.New(wserr.Corrupt, "replicate", c.url, "the owner object %s is not one this build reads: remove it if no other store replicates here", OwnerKey)
	}
	return o.ReplicaOwner, true, nil
}

// conflict is the error of a replica owned by cur, another store than
// c's: a copy restored from c's store, or any other.
func (c *Claim) conflict(cur ReplicaOwner) error {
	if cur.Source == c.me.Device {
		return wserr.New(wserr.Conflict, "replicate", c.url,
			"a store restored from this store's replica replicates here now, %s; this store is %s: stop replicating this one, or give it --to a URL of its own (--take-over makes this store the replica's again, and the restored one is refused)",
			cur, c.me)
	}
	return wserr.New(wserr.Conflict, "replicate", c.url,
		"the replica here belongs to another store, %s; this store is %s: give --to a URL of its own, or, if that store is gone or this one replaces it, --take-over",
		cur, c.me)
}
