package vault

import (
	"context"
	"os"

	"avfs/wire"
)

// Stats counts what the vault holds and what it costs on disk (see
// wire.VaultStats). It reads one consistent state in a read transaction
// and changes nothing. Cost: it reads the chunk lists of every inode row
// and version and the size of every chunk, once: linear in the vault's
// rows and chunks, like gc's selection.
func (v *Vault) Stats(ctx context.Context) (wire.VaultStats, error) {
	out := wire.VaultStats{Kind: wire.VaultStatsKind}
	err := v.view(ctx, "stats", func(q querier, st state) error {
		out.Vault = st.name
		rows, err := q.QueryContext(ctx, "SELECT kind, COUNT(*), COALESCE(SUM(size), 0) FROM inodes WHERE gen_to = "+liveSQL+" GROUP BY kind")
		if err != nil {
			return err
		}
		for rows.Next() {
			var kind Kind
			var n, size int64
			if err := rows.Scan(&kind, &n, &size); err != nil {
				rows.Close()
				return err
			}
			switch kind {
			case KindFile:
				out.Live.Files, out.Live.Bytes = n, size
			case KindDir:
				out.Live.Dirs = n
			case KindSymlink:
				out.Live.Symlinks = n
			default:
				out.Live.Other += n
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, c := range []struct {
			query string
			into  *int64
		}{
			{"SELECT COUNT(*), 0 FROM chunks", &out.Storage.Chunks},
			{"SELECT (SELECT COUNT(*) FROM inodes) + (SELECT COUNT(*) FROM dentries), 0", &out.Storage.Rows},
			{"SELECT (SELECT COUNT(*) FROM inodes WHERE gen_to = " + liveSQL + ") + (SELECT COUNT(*) FROM dentries WHERE gen_to = " + liveSQL + "), 0", &out.Storage.LiveRows},
			{"SELECT COUNT(*), 0 FROM versions", &out.History.Versions},
			{"SELECT COUNT(*), 0 FROM checkpoints", &out.History.Checkpoints},
			{"SELECT COUNT(*), 0 FROM marks", &out.History.Marks},
			{"SELECT COUNT(*), 0 FROM forks", &out.History.Forks},
			{"SELECT COUNT(*), 0 FROM audit", &out.History.AuditRows},
		} {
			var zero int64
			if err := q.QueryRowContext(ctx, c.query).Scan(c.into, &zero); err != nil {
				return err
			}
		}
		var pageSize, free int64
		if err := q.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
			return err
		}
		if err := q.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free); err != nil {
			return err
		}
		out.Storage.FreeBytes = pageSize * free
		// Which chunks the live state, and anything at all, refers to.
		live, err := hashesIn(ctx, q, sqlQuery{sql: "SELECT chunks FROM inodes WHERE kind = 1 AND gen_to = " + liveSQL})
		if err != nil {
			return err
		}
		all, err := referencedHashes(ctx, q)
		if err != nil {
			return err
		}
		sizes, err := q.QueryContext(ctx, "SELECT hash, size FROM chunks")
		if err != nil {
			return err
		}
		defer sizes.Close()
		for sizes.Next() {
			var h []byte
			var n int64
			if err := sizes.Scan(&h, &n); err != nil {
				return err
			}
			out.Storage.ChunkBytes += n
			_, inLive := live[string(h)]
			_, inAny := all[string(h)]
			switch {
			case inLive:
				out.Live.UniqueBytes += n
			case inAny:
				out.History.OnlyBytes += n
			default:
				out.Storage.Unreferenced++
			}
		}
		return sizes.Err()
	})
	if err != nil {
		return out, err
	}
	for _, p := range []string{v.path, v.path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			out.Storage.FileSize += fi.Size()
		}
	}
	return out, nil
}
