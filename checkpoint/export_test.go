package checkpoint

// PruneQueries are the statements Prune runs against the checkpoints
// table, for the test that holds them to the primary key.
var PruneQueries = map[string]string{"count": countSQL, "rows": rowsSQL, "delete": deleteSQL, "relink": relinkSQL}
