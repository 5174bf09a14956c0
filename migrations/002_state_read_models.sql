-- Read models of the State aggregate: the public SQL surface (docs/sql.md).
-- Every row is a projection of the event log and can be rebuilt from it, so
-- nothing here holds a wall-clock time: times are the events' occurred-at.

-- One row per state ever created; a deleted name that is used again gets a
-- new row (new state_id) and the old row keeps its history.
CREATE TABLE states (
  state_id           uuid PRIMARY KEY,
  name               text NOT NULL,
  created_at         timestamptz NOT NULL,
  deleted_at         timestamptz,
  current_version    integer NOT NULL DEFAULT 0,
  current_serial     bigint,
  lineage            text,
  terraform_version  text,
  instance_count     integer NOT NULL DEFAULT 0,
  resource_count     integer NOT NULL DEFAULT 0,
  updated_at         timestamptz NOT NULL
);

CREATE UNIQUE INDEX states_live_name ON states (name) WHERE deleted_at IS NULL;

-- One row per accepted commit. `version` is ours (1, 2, 3… per state);
-- `serial` is terraform's and may repeat or go backwards.
CREATE TABLE state_versions (
  state_id           uuid NOT NULL,
  version            integer NOT NULL,
  serial             bigint NOT NULL,
  lineage            text NOT NULL,
  source             text NOT NULL,
  actor              text NOT NULL,
  terraform_version  text NOT NULL,
  instance_count     integer NOT NULL,
  resource_count     integer NOT NULL,
  checksum           text NOT NULL,
  -- json (exact text) where a column feeds the rebuild of an old version.
  outputs            json NOT NULL,
  check_results      json,
  extra              json,
  created_at         timestamptz NOT NULL,
  PRIMARY KEY (state_id, version)
);

CREATE INDEX state_versions_serial ON state_versions (state_id, serial);

-- One row per lifecycle of an instance object: opened by the commit that
-- brought it (or a change of it) into the state, closed by the commit that
-- changed or removed it. Alive rows have delete_version NULL.
CREATE TABLE resources (
  state_id               uuid NOT NULL,
  address                text NOT NULL,
  resource_address       text NOT NULL,
  mode                   text NOT NULL,
  type                   text NOT NULL,
  name                   text NOT NULL,
  module_path            text NOT NULL,
  index_key              text,
  deposed_key            text,
  provider               text NOT NULL,
  each_mode              text,
  schema_version         integer NOT NULL,
  attributes             jsonb,
  sensitive_attributes   jsonb,
  private                text,
  dependencies           jsonb,
  status                 text,
  create_before_destroy  boolean NOT NULL,
  extra                  jsonb,
  instance               json NOT NULL,
  resource_extra         json,
  attributes_hash        text NOT NULL,
  create_version         integer NOT NULL,
  delete_version         integer,
  create_serial          bigint NOT NULL,
  delete_serial          bigint,
  PRIMARY KEY (state_id, address, create_version)
);

-- Partial indexes on the alive rows serve "now" queries (current_resources,
-- inventories, blast radius) without reading the wide rows, and keep good
-- plans even before the planner has statistics.
CREATE INDEX resources_live ON resources (state_id, address) INCLUDE (resource_address)
  WHERE delete_version IS NULL;
CREATE INDEX resources_live_inventory ON resources (state_id, type, module_path)
  WHERE delete_version IS NULL;
CREATE INDEX resources_address ON resources (address);
CREATE INDEX resources_live_by_resource ON resources (state_id, resource_address)
  INCLUDE (address) WHERE delete_version IS NULL;
CREATE INDEX resources_type ON resources (type);

-- Edges declared by an instance (its `dependencies`), living as long as the
-- lifecycle of the instance that declares them.
CREATE TABLE resource_dependencies (
  state_id        uuid NOT NULL,
  from_address    text NOT NULL,
  -- the dependent instance's resource address: lets a walk over the graph
  -- step from resource to resource instead of through every instance
  from_resource_address text NOT NULL,
  to_address      text NOT NULL,
  create_version  integer NOT NULL,
  delete_version  integer,
  create_serial   bigint NOT NULL,
  delete_serial   bigint,
  PRIMARY KEY (state_id, from_address, to_address, create_version)
);

CREATE INDEX resource_dependencies_live_to ON resource_dependencies (state_id, to_address)
  INCLUDE (from_resource_address, from_address) WHERE delete_version IS NULL;
CREATE INDEX resource_dependencies_to ON resource_dependencies (state_id, to_address);

-- Root module outputs, one row per lifecycle: a new one whenever the value,
-- type or sensitivity changes.
CREATE TABLE outputs (
  state_id        uuid NOT NULL,
  name            text NOT NULL,
  value           jsonb NOT NULL,
  type            jsonb,
  sensitive       boolean NOT NULL,
  create_version  integer NOT NULL,
  delete_version  integer,
  create_serial   bigint NOT NULL,
  delete_serial   bigint,
  PRIMARY KEY (state_id, name, create_version)
);

CREATE INDEX outputs_alive ON outputs (state_id, delete_version);

-- A row while the state is locked.
CREATE TABLE state_locks (
  state_id     uuid PRIMARY KEY,
  name         text NOT NULL,
  lock_id      text NOT NULL,
  operation    text,
  who          text,
  info         jsonb NOT NULL,
  acquired_at  timestamptz NOT NULL,
  acquired_by  text NOT NULL
);

CREATE INDEX state_locks_name ON state_locks (name);

-- The current document of every live state, byte for byte what a terraform
-- GET serves, so that GET costs one row read however large the state.
-- A deleted state's row is removed, so a name has at most one row.
CREATE TABLE raw_state (
  state_id    uuid PRIMARY KEY,
  name        text NOT NULL,
  version     integer NOT NULL,
  serial      bigint,
  document    text,
  md5         text,
  updated_at  timestamptz NOT NULL
);

CREATE UNIQUE INDEX raw_state_name ON raw_state (name);

-- Instances alive now, in states that are not deleted.
CREATE VIEW current_resources AS
SELECT s.name AS state_name,
       r.state_id, r.address, r.resource_address, r.mode, r.type, r.name, r.module_path,
       r.index_key, r.deposed_key, r.provider, r.each_mode, r.schema_version,
       r.attributes, r.sensitive_attributes, r.private, r.dependencies, r.status,
       r.create_before_destroy, r.extra, r.instance, r.resource_extra, r.attributes_hash,
       r.create_version, r.create_serial
  FROM resources r
  JOIN states s ON s.state_id = r.state_id
 WHERE r.delete_version IS NULL
   AND s.deleted_at IS NULL;
