package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers "mysql" for --db mysql:…
	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq/cmd/acemq/internal/redact"
	"github.com/acemq-go/acemq/cmd/acemq/internal/safetext"
	"github.com/acemq-go/acemq/saga"
	"github.com/acemq-go/acemq/sqlstore"
)

// newSaga is `acemq saga list|show|resolve|compensate --db DSN`: the
// operators' view of persisted sagas (behaviour spec §7.8).
func newSaga() *cobra.Command {
	var dsn string
	cmd := &cobra.Command{
		Use:   "saga",
		Short: "List, show, resolve or re-compensate persisted saga instances",
		Long: "Operators' tools for the acemq_saga tables. --db takes postgres://…, mysql:<go-sql-driver DSN> or " +
			"sqlite:<path> (default $ACEMQ_DB). Unresolved instances (a compensation failed) wait for a person: " +
			"resolve marks one dealt with; compensate asks the runners' next sweep to run its failed compensations again.",
		Example: `  acemq saga list --status unresolved --db postgres://localhost/shop
  acemq saga show 3f2a… --db sqlite:shop.db
  acemq saga resolve 3f2a… --note "refunded by hand, ticket 42" --db postgres://localhost/shop
  acemq saga compensate 3f2a… --db postgres://localhost/shop`,
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&dsn, "db", os.Getenv("ACEMQ_DB"), "database: postgres://…, mysql:user:pass@tcp(host:3306)/db or sqlite:path (default $ACEMQ_DB)")
	withStore := func(cmd *cobra.Command, f func(ctx context.Context, s *saga.Store) error) error {
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		db, d, err := openSagaDB(dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		s, err := saga.NewStore(db, d)
		if err != nil {
			return err
		}
		return f(ctx, s)
	}
	var statuses []string
	list := &cobra.Command{
		Use:     "list",
		Example: `  acemq saga list --status unresolved --db postgres://localhost/shop`,
		Short:   "List instances (newest first, up to 1000), optionally of some statuses",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(ctx context.Context, s *saga.Store) error {
				list, err := s.List(ctx, statuses...)
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "INSTANCE\tSAGA\tSTATUS\tFAILED STEP\tUPDATED")
				for _, in := range list {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", line(in.ID), line(in.Saga), line(in.Status), dash(in.FailedStep), in.Updated.UTC().Format(time.RFC3339))
				}
				return w.Flush()
			})
		},
	}
	list.Flags().StringSliceVar(&statuses, "status", nil, "only these statuses: running, compensating, completed, compensated, unresolved")
	show := &cobra.Command{
		Use:     "show INSTANCE",
		Example: `  acemq saga show 3f2a… --db sqlite:shop.db`,
		Short:   "Show an instance and its steps",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, s *saga.Store) error {
				in, err := s.Show(ctx, args[0])
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "instance  %s\nsaga      %s\nstatus    %s\n", line(in.ID), line(in.Saga), line(in.Status))
				if in.FailedStep != "" || in.Failure != "" {
					fmt.Fprintf(out, "failed    %s: %s\n", dash(in.FailedStep), line(in.Failure))
				}
				if in.LockedBy != "" {
					fmt.Fprintf(out, "lease     %s until %s\n", line(in.LockedBy), in.LockedUntil.UTC().Format(time.RFC3339))
				}
				w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "#\tSTEP\tSTATUS\tATTEMPTS\tLAST ERROR")
				for _, st := range in.Steps {
					fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\n", st.Index+1, line(st.Name), line(st.Status), st.Attempts, dash(st.LastError))
				}
				return w.Flush()
			})
		},
	}
	var note string
	resolve := &cobra.Command{
		Use:     "resolve INSTANCE",
		Example: `  acemq saga resolve 3f2a… --note "refunded by hand, ticket 42" --db postgres://localhost/shop`,
		Short:   "Mark an unresolved instance as dealt with by hand",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, s *saga.Store) error {
				if err := s.Resolve(ctx, args[0], note); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "resolved %s\n", line(args[0]))
				return nil
			})
		},
	}
	resolve.Flags().StringVar(&note, "note", "", "what was done, kept in the instance's failure text")
	compensate := &cobra.Command{
		Use:     "compensate INSTANCE",
		Example: `  acemq saga compensate 3f2a… --db postgres://localhost/shop`,
		Short:   "Ask the runners' next sweep to run an unresolved instance's failed compensations again",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, s *saga.Store) error {
				if err := s.Compensate(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "compensation requested for %s; a runner's next Sweep runs it\n", line(args[0]))
				return nil
			})
		},
	}
	cmd.AddCommand(list, show, resolve, compensate)
	return cmd
}

// dash is s escaped by the safetext rule (line), or "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return line(s)
}

// line is safetext.Line: saga names, step errors and failure texts can
// quote what a message carried, so they are shown escaped.
func line(s string) string { return safetext.Line(s) }

// openSagaDB opens --db: postgres://…, mysql:<DSN> or sqlite:<path>.
func openSagaDB(dsn string) (*sql.DB, sqlstore.Dialect, error) {
	var driver, src string
	var d sqlstore.Dialect
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		driver, src, d = "pgx", dsn, sqlstore.PostgreSQL
	case strings.HasPrefix(dsn, "mysql:"):
		driver, src, d = "mysql", strings.TrimPrefix(dsn, "mysql:"), sqlstore.MySQL
	case strings.HasPrefix(dsn, "sqlite:"):
		driver, src, d = "sqlite", strings.TrimPrefix(dsn, "sqlite:"), sqlstore.SQLite
	case dsn == "":
		return nil, 0, errors.New("acemq: no database given; pass --db postgres://…, mysql:… or sqlite:path (or set ACEMQ_DB)")
	default:
		return nil, 0, fmt.Errorf("acemq: --db %s is not postgres://…, mysql:… or sqlite:path", redact.URL(dsn))
	}
	if d == sqlstore.SQLite {
		// Opening a SQLite path that does not exist would create an empty
		// database there: an operator's typo would leave a file behind and
		// then report "no sagas". The tool only reads and updates sagas an
		// application stored, so a missing file is an error.
		if err := sqliteExists(src); err != nil {
			return nil, 0, err
		}
	}
	db, err := sql.Open(driver, src)
	if err != nil {
		return nil, 0, fmt.Errorf("acemq: cannot open the database %s (%v); check --db", redact.URL(dsn), err)
	}
	return db, d, nil
}

// sqliteExists refuses a --db sqlite:PATH whose file is not there (or is a
// directory). A file: URI's path is checked the same way, and in-memory
// databases are refused: there is nothing stored in them to look at.
func sqliteExists(src string) error {
	path := src
	if strings.HasPrefix(path, "file:") {
		path = strings.TrimPrefix(path, "file:")
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
	}
	if path == "" || path == ":memory:" {
		return fmt.Errorf("acemq: --db sqlite:%s names no database file; give the path of the application's SQLite database", src)
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("acemq: --db sqlite:%s: %v; give the path of an existing SQLite database (the tool never creates one)", src, err)
	case fi.IsDir():
		return fmt.Errorf("acemq: --db sqlite:%s is a directory; give the path of the application's SQLite database file", src)
	}
	return nil
}
