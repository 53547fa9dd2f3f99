-- 0001: every record of the coordinator's store.
--
-- Each table keeps the record as the JSON the Go type encodes to (doc, of
-- type json so that its bytes come back as they were written: the audit
-- chain hashes them) plus the columns that keys, uniqueness, ordering and
-- filters need. Keys and names use the "C" collation: ordering is byte
-- order, whatever the database's locale.

CREATE TABLE tenants (
	id   text COLLATE "C" PRIMARY KEY,
	doc  json NOT NULL
);

CREATE TABLE principals (
	id   text COLLATE "C" PRIMARY KEY,
	doc  json NOT NULL
);

-- Bearer tokens, stored as the SHA-256 of the token only.
CREATE TABLE credentials (
	hash         text COLLATE "C" PRIMARY KEY,
	principal_id text COLLATE "C" NOT NULL REFERENCES principals (id),
	doc          json NOT NULL
);
CREATE INDEX credentials_principal ON credentials (principal_id);

-- One-time console sign-in links, stored as the hash of their secret.
-- Redeemed under the row lock, like join tokens.
CREATE TABLE signin_links (
	hash         text COLLATE "C" PRIMARY KEY,
	principal_id text COLLATE "C" NOT NULL REFERENCES principals (id),
	expires_at   timestamptz NOT NULL,
	used_at      timestamptz,
	doc          json NOT NULL
);

-- Join tokens, stored as the SHA-256 of the token. Enroll consumes one under
-- its row lock (SELECT ... FOR UPDATE), so two coordinators racing for the
-- same token cannot both enroll.
CREATE TABLE join_tokens (
	hash       text COLLATE "C" PRIMARY KEY,
	tenant     text COLLATE "C" NOT NULL,
	expires_at timestamptz NOT NULL,
	used_at    timestamptz,
	doc        json NOT NULL
);

-- The node registry. Link state (which coordinator holds the tunnel) is not
-- here: it lives in memory, and with replicas in a table of their own.
CREATE TABLE nodes (
	id         text COLLATE "C" PRIMARY KEY,
	tenant     text COLLATE "C" NOT NULL,
	revoked_at timestamptz,
	doc        json NOT NULL
);
CREATE INDEX nodes_tenant ON nodes (tenant, id);

-- The run index: the read model agents push rows into. rev orders pushes;
-- created_at and run_ref order the listing (newest first).
CREATE TABLE runs (
	run_ref           text COLLATE "C" PRIMARY KEY,
	tenant            text COLLATE "C" NOT NULL,
	node_id           text COLLATE "C" NOT NULL,
	rev               numeric(20, 0) NOT NULL,
	created_at        timestamptz NOT NULL,
	state             text COLLATE "C" NOT NULL,
	live_ref          text COLLATE "C" NOT NULL,
	claude_session_id text COLLATE "C" NOT NULL,
	doc               json NOT NULL
);
CREATE INDEX runs_list ON runs (tenant, created_at, run_ref);
CREATE INDEX runs_state ON runs (tenant, state, created_at, run_ref);
CREATE INDEX runs_live_ref ON runs (tenant, live_ref) WHERE live_ref <> '';
CREATE INDEX runs_claude_session ON runs (tenant, claude_session_id) WHERE claude_session_id <> '';
CREATE INDEX runs_node ON runs (node_id);

-- A deleted run's ref: a late push from its agent must not bring it back.
CREATE TABLE run_tombstones (
	run_ref    text COLLATE "C" PRIMARY KEY,
	deleted_at timestamptz NOT NULL
);

-- What belongs to the session rather than its process: name, archive mark,
-- release, grants.
CREATE TABLE run_meta (
	run_ref text COLLATE "C" PRIMARY KEY REFERENCES runs (run_ref) ON DELETE CASCADE,
	tenant  text COLLATE "C" NOT NULL,
	doc     json NOT NULL
);

-- Per-caller marks: one row per owner and run, only while it marks something.
CREATE TABLE marks (
	tenant    text COLLATE "C" NOT NULL,
	owner     text COLLATE "C" NOT NULL,
	run_ref   text COLLATE "C" NOT NULL REFERENCES runs (run_ref) ON DELETE CASCADE,
	pinned_at timestamptz,
	doc       json NOT NULL,
	PRIMARY KEY (tenant, owner, run_ref)
);
CREATE INDEX marks_pins ON marks (tenant, owner, pinned_at, run_ref) WHERE pinned_at IS NOT NULL;
CREATE INDEX marks_run ON marks (run_ref);

CREATE TABLE profiles (
	ref    text COLLATE "C" PRIMARY KEY,
	tenant text COLLATE "C" NOT NULL,
	name   text COLLATE "C" NOT NULL,
	doc    json NOT NULL,
	CONSTRAINT profiles_name UNIQUE (tenant, name)
);

CREATE TABLE workspaces (
	ref    text COLLATE "C" PRIMARY KEY,
	tenant text COLLATE "C" NOT NULL,
	name   text COLLATE "C" NOT NULL,
	doc    json NOT NULL,
	CONSTRAINT workspaces_name UNIQUE (tenant, name)
);

-- The setup command and the approvals of a workspace.
CREATE TABLE workspace_settings (
	ref  text COLLATE "C" PRIMARY KEY REFERENCES workspaces (ref) ON DELETE CASCADE,
	doc  json NOT NULL
);

-- Vault secrets, sealed by the coordinator before they reach the store.
CREATE TABLE secrets (
	ref    text COLLATE "C" PRIMARY KEY,
	tenant text COLLATE "C" NOT NULL,
	name   text COLLATE "C" NOT NULL,
	doc    json NOT NULL,
	CONSTRAINT secrets_name UNIQUE (tenant, name)
);

-- The audit ledger: one hash chain per tenant. Appends lock the tenant's
-- audit_heads row (FOR UPDATE) for the rest of their transaction, so writers
-- on any number of coordinators extend one chain.
CREATE TABLE audit (
	tenant        text COLLATE "C" NOT NULL,
	seq           bigint NOT NULL,
	at            timestamptz NOT NULL,
	event         text COLLATE "C" NOT NULL,
	run_ref       text COLLATE "C" NOT NULL,
	credential_id text COLLATE "C" NOT NULL,
	principal_id  text COLLATE "C" NOT NULL,
	doc           json NOT NULL,
	PRIMARY KEY (tenant, seq)
);

CREATE TABLE audit_heads (
	tenant text COLLATE "C" PRIMARY KEY,
	seq    bigint NOT NULL,
	doc    json -- the last entry; NULL until the first append commits
);

-- The last windowed audit entry per (tenant, event, run, reader).
CREATE TABLE audit_windows (
	tenant        text COLLATE "C" NOT NULL,
	event         text COLLATE "C" NOT NULL,
	run_ref       text COLLATE "C" NOT NULL,
	credential_id text COLLATE "C" NOT NULL,
	last_at       timestamptz NOT NULL,
	PRIMARY KEY (tenant, event, run_ref, credential_id)
);
