// Package drivers links the three SQL drivers the repository's tests run
// on, so that this workspace module's go.mod pins their versions for every
// module of the workspace: the file scripts/sqldrivers.sh overlays on each
// package that imports <module>/internal/dbtest imports the same three, and
// in workspace mode they resolve through this module's requirements. No
// published module lists a driver for its tests (docs/installing.md).
package drivers

import (
	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"
)
