package checkpoint

// PruneQueries are the statements Prune runs against the checkpoints
// table, for the test that holds them to the primary key.
var PruneQueries = map[string]string{"count": countSQL, "rows": rowsSQL, "delete": deleteSQL, "relink": relinkSQL}

// PruneBytesQueries are the statements PruneBytes and Create run against
// the checkpoints table for the byte cap.
var PruneBytesQueries = map[string]string{"newest": newestSQL, "oldest": oldestSQL, "next": nextSQL, "last": lastSQL,
	"delete": deleteSQL, "relink": relinkSQL}
