// Command wsctl inspects, maintains and drives a wsstore store from the
// command line: queries over runs, checkpoints and the journal, maintenance
// (gc, vacuum, fsck), a demo session, and batch, the JSON-lines way in for
// hosts written in other languages.
package main
