-- Coordinator replicas sharing this database (issue 24). Each replica
-- registers itself with the address its peers reach it on and renews its
-- heartbeat; node_holders says which replica holds each node's tunnel, so
-- that a request reaching another replica is forwarded there. Times are
-- the database's clock (now()), never a replica's, so that clock skew
-- between hosts cannot make a live replica look dead.
CREATE TABLE replicas (
	id           text COLLATE "C" PRIMARY KEY,
	relay_addr   text NOT NULL,
	version      text NOT NULL DEFAULT '',
	started_at   timestamptz NOT NULL DEFAULT now(),
	heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- One row per node whose tunnel a replica holds or held last. A new
-- tunnel overwrites the row (the newest connection wins); a tunnel that
-- drops sets lost_at rather than deleting, so that every replica applies
-- the same presence grace.
CREATE TABLE node_holders (
	node_id    text COLLATE "C" PRIMARY KEY,
	replica_id text COLLATE "C" NOT NULL,
	transport  text NOT NULL,
	since      timestamptz NOT NULL,
	last_beat  timestamptz NOT NULL,
	rtt_ns     bigint NOT NULL DEFAULT 0,
	lost_at    timestamptz
);

CREATE INDEX node_holders_replica ON node_holders (replica_id);

-- The key material every replica must share (the CA's and the vault key's
-- fingerprints): a replica started with another CA or vault key than the
-- first one refuses to serve rather than split the fleet.
CREATE TABLE cluster_keys (
	name        text COLLATE "C" PRIMARY KEY,
	fingerprint text NOT NULL,
	set_at      timestamptz NOT NULL DEFAULT now()
);
