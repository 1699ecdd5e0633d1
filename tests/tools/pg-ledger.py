#!/usr/bin/python3
"""A PostgreSQL client that remembers what the database promised it.

  pg-ledger.py write --host H --port P --ledger FILE --stop-file FILE [--max-outage S]
      Inserts numbered rows into table "commits", one row per transaction. The id of every
      transaction whose COMMIT returned success is appended to the ledger (flushed at once); the
      id of one whose outcome is unknown (the connection broke during INSERT or COMMIT) goes to
      FILE.doubt. Lost connections are retried every 0.2 s; the writer gives up (exit 2) after
      max-outage seconds (default 60) without a successful commit. It stops when the stop file
      exists and prints "writer: N committed, D in doubt, R reconnects, longest gap G s".
  pg-ledger.py check --host H --port P --ledger FILE [--live]
      Reads every id in the table: exit 0 when each id of the ledger is there and every row that
      is not in the ledger is one of the in-doubt ids; prints
      "check: rows N, ledger L, in doubt D, missing M, unexplained U". --live while the writer
      runs: rows newer than the ledger's last id were committed after it was read.

An id is never reused, so a commit in doubt that did happen shows up as an extra row, never as a
duplicate key. Needs python3-psycopg2 (scripts/deps.sh).
"""
import argparse
import os
import sys
import time

import psycopg2

TABLE = "CREATE TABLE IF NOT EXISTS commits (id bigint PRIMARY KEY, at timestamptz DEFAULT now())"


def connect(a):
    # Keepalives and tcp_user_timeout: a connection to a node that died is noticed in seconds,
    # not after the kernel's 15 minutes of retransmissions.
    return psycopg2.connect(host=a.host, port=a.port, user="postgres", dbname="postgres",
                            connect_timeout=3, keepalives=1, keepalives_idle=2,
                            keepalives_interval=1, keepalives_count=3, tcp_user_timeout=5000,
                            application_name="hak-ledger")


def write(a):
    ledger = open(a.ledger, "a", buffering=1)
    doubt = open(a.ledger + ".doubt", "a", buffering=1)
    committed = in_doubt = reconnects = 0
    last_ok = time.monotonic()
    gap = 0.0
    next_id = 1
    conn = None
    errors = []
    while not os.path.exists(a.stop_file):
        if conn is None:
            try:
                conn = connect(a)
                with conn.cursor() as c:
                    c.execute(TABLE)
                    c.execute("SELECT coalesce(max(id), 0) FROM commits")
                    next_id = max(next_id, c.fetchone()[0] + 1)
                conn.commit()
            except psycopg2.Error as e:
                conn = None
                errors.append(str(e).strip().splitlines()[0] if str(e).strip() else repr(e))
                if time.monotonic() - last_ok > a.max_outage:
                    print(f"writer: no commit for {a.max_outage} s, giving up; last errors: "
                          f"{errors[-3:]}", file=sys.stderr)
                    return 2
                time.sleep(0.2)
                reconnects += 1
                continue
        i = next_id
        next_id += 1
        try:
            with conn.cursor() as c:
                c.execute("INSERT INTO commits (id) VALUES (%s)", (i,))
            conn.commit()
        except psycopg2.Error as e:
            # Whether the row is in the database is unknown: the server may have committed it
            # and died before answering.
            doubt.write(f"{i}\n")
            in_doubt += 1
            errors.append(str(e).strip().splitlines()[0] if str(e).strip() else repr(e))
            try:
                conn.close()
            except psycopg2.Error:
                pass
            conn = None
            continue
        ledger.write(f"{i}\n")
        committed += 1
        now = time.monotonic()
        gap = max(gap, now - last_ok)
        last_ok = now
    print(f"writer: {committed} committed, {in_doubt} in doubt, {reconnects} reconnects, "
          f"longest gap {gap:.1f} s")
    return 0


def read_ids(path):
    try:
        with open(path) as f:
            return {int(x) for x in f if x.strip()}
    except FileNotFoundError:
        return set()


def check(a):
    ledger = read_ids(a.ledger)
    doubt = read_ids(a.ledger + ".doubt")
    conn = connect(a)
    with conn.cursor() as c:
        c.execute("SELECT id FROM commits")
        rows = {r[0] for r in c.fetchall()}
    conn.close()
    missing = sorted(ledger - rows)
    unexplained = sorted(rows - ledger - doubt)
    in_flight = []
    if a.live:
        # The writer runs: the files were read before the table, so rows it committed since
        # are newer than everything in them (ids only grow).
        top = max(ledger | doubt, default=0)
        in_flight = [i for i in unexplained if i > top]
        unexplained = [i for i in unexplained if i <= top]
    print(f"check: rows {len(rows)}, ledger {len(ledger)}, in doubt {len(doubt)}, "
          f"missing {len(missing)}, unexplained {len(unexplained)}"
          + (f", in flight {len(in_flight)}" if a.live else "")
          + (f"; first missing {missing[:10]}" if missing else "")
          + (f"; first unexplained {unexplained[:10]}" if unexplained else ""))
    return 1 if missing or unexplained else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["write", "check"])
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ledger", required=True)
    p.add_argument("--stop-file")
    p.add_argument("--max-outage", type=float, default=60.0)
    p.add_argument("--live", action="store_true")
    a = p.parse_args()
    if a.mode == "write":
        if not a.stop_file:
            p.error("write needs --stop-file")
        return write(a)
    return check(a)


if __name__ == "__main__":
    sys.exit(main())
