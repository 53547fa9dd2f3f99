-- 0002: single sign-on. A person's identity at an OpenID Connect provider
-- (issuer and subject) and the principal it signs in as.

CREATE TABLE external_identities (
	issuer       text COLLATE "C" NOT NULL,
	subject      text COLLATE "C" NOT NULL,
	principal_id text COLLATE "C" NOT NULL REFERENCES principals (id),
	PRIMARY KEY (issuer, subject)
);
