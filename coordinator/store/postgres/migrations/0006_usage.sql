-- Per-turn usage rows agents push (docs/rules/usage.md). (run_ref, seq)
-- is a row's identity: a repeated push inserts nothing (R-USE-6).
CREATE TABLE usage_turns (
	run_ref     text COLLATE "C" NOT NULL,
	seq         bigint NOT NULL,
	tenant      text COLLATE "C" NOT NULL,
	profile_ref text COLLATE "C" NOT NULL,
	at          timestamptz NOT NULL,
	doc         json NOT NULL,
	PRIMARY KEY (run_ref, seq)
);

CREATE INDEX usage_turns_tenant_at ON usage_turns (tenant, at, run_ref, seq);
CREATE INDEX usage_turns_tenant_profile_at ON usage_turns (tenant, profile_ref, at DESC, run_ref DESC, seq DESC);
