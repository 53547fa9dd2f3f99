-- Idempotency-Key records (R-CRT-7): the first answer to a POST that
-- starts a run, kept 24 h per scope (tenant, credential, route) and key.
-- A claim is one INSERT ... ON CONFLICT that replaces only an expired row,
-- so two coordinators claiming the same key at once claim it once.
CREATE TABLE idempotency_keys (
	scope      text COLLATE "C" NOT NULL,
	key        text COLLATE "C" NOT NULL,
	expires_at timestamptz NOT NULL,
	doc        json NOT NULL,
	PRIMARY KEY (scope, key)
);

CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
