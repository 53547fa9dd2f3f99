-- Outgoing webhooks of a tenant (R-NOTIF-1) and their delivery logs
-- (R-NOTIF-5): a delivery row is replaced at each attempt, and a hook
-- keeps its newest 50.
CREATE TABLE webhooks (
	id     text COLLATE "C" PRIMARY KEY,
	tenant text COLLATE "C" NOT NULL,
	doc    json NOT NULL
);

CREATE INDEX webhooks_tenant ON webhooks (tenant, id);

CREATE TABLE webhook_deliveries (
	hook_id    text COLLATE "C" NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
	id         text COLLATE "C" NOT NULL,
	created_at timestamptz NOT NULL,
	doc        json NOT NULL,
	PRIMARY KEY (hook_id, id)
);

CREATE INDEX webhook_deliveries_newest ON webhook_deliveries (hook_id, created_at DESC, id DESC);
