//! The on-disk store: one record per container, volume and user network in
//! a single-file, crash-safe database (redb: copy-on-write B-trees, every commit durable). A record is
//! written before the containerd call that depends on it, so `kill -9` at any
//! instant loses nothing that was answered.

use holdfast_core::{ContainerId, NetworkRecord, Record, Stored, VolumeRecord};
use redb::{Database, ReadableTable, TableDefinition};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

const CONTAINERS: TableDefinition<&str, &[u8]> = TableDefinition::new("containers");
const VOLUMES: TableDefinition<&str, &[u8]> = TableDefinition::new("volumes");
const NETWORKS: TableDefinition<&str, &[u8]> = TableDefinition::new("networks");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const SCHEMA_KEY: &str = "schema_version";
/// Bumped whenever a stored value changes shape so that an older holdfastd
/// could misread it.
pub const SCHEMA_VERSION: u64 = 1;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {path}: {source}")]
    Db {
        path: PathBuf,
        #[source]
        source: Box<redb::Error>,
    },
    #[error(
        "store {path} has schema version {found}, newer than this holdfastd understands ({SCHEMA_VERSION}): refusing to guess; run a newer holdfastd"
    )]
    TooNew { path: PathBuf, found: u64 },
    #[error(
        "store {path}: record {key} cannot be read ({message}); refusing to start rather than forget a container"
    )]
    Corrupt {
        path: PathBuf,
        key: String,
        message: String,
    },
    #[error("store {path}: record {key} cannot be encoded: {message}")]
    Encode {
        path: PathBuf,
        key: String,
        message: String,
    },
}

#[derive(Debug)]
pub struct Store {
    db: Database,
    path: PathBuf,
}

impl Store {
    /// Opens (or creates) the store and checks its schema version.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let db = Database::create(path).map_err(db_err(path))?;
        let store = Store {
            db,
            path: path.to_owned(),
        };
        store.check_schema()?;
        Ok(store)
    }

    /// The database file, for reopening it after a failure.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_schema(&self) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(db_err(&self.path))?;
        {
            let mut meta = tx.open_table(META).map_err(db_err(&self.path))?;
            let found = meta
                .get(SCHEMA_KEY)
                .map_err(db_err(&self.path))?
                .map(|v| v.value());
            match found {
                Some(v) if v > SCHEMA_VERSION => {
                    return Err(StoreError::TooNew {
                        path: self.path.clone(),
                        found: v,
                    });
                }
                Some(_) => {}
                None => {
                    meta.insert(SCHEMA_KEY, SCHEMA_VERSION)
                        .map_err(db_err(&self.path))?;
                }
            }
            // Make sure the tables exist so the first load finds them.
            for table in [CONTAINERS, VOLUMES, NETWORKS] {
                tx.open_table(table).map_err(db_err(&self.path))?;
            }
        }
        tx.commit().map_err(db_err(&self.path))
    }

    /// Every record, for `Input::Restore`.
    pub fn load(&self) -> Result<Stored, StoreError> {
        Ok(Stored {
            containers: self.load_table(CONTAINERS)?,
            volumes: self.load_table(VOLUMES)?,
            networks: self.load_table(NETWORKS)?,
        })
    }

    /// Writes one container's record durably (the commit is fsynced
    /// before it returns).
    pub fn put(&self, record: &Record) -> Result<(), StoreError> {
        self.put_in(CONTAINERS, record.id.as_str(), record)
    }

    /// Deletes one container's record durably.
    pub fn delete(&self, id: &ContainerId) -> Result<(), StoreError> {
        self.delete_in(CONTAINERS, id.as_str())
    }

    pub fn put_volume(&self, record: &VolumeRecord) -> Result<(), StoreError> {
        self.put_in(VOLUMES, &record.name, record)
    }

    pub fn delete_volume(&self, name: &str) -> Result<(), StoreError> {
        self.delete_in(VOLUMES, name)
    }

    pub fn put_network(&self, record: &NetworkRecord) -> Result<(), StoreError> {
        self.put_in(NETWORKS, &record.name, record)
    }

    pub fn delete_network(&self, name: &str) -> Result<(), StoreError> {
        self.delete_in(NETWORKS, name)
    }

    fn load_table<T: DeserializeOwned>(
        &self,
        definition: TableDefinition<&str, &[u8]>,
    ) -> Result<Vec<T>, StoreError> {
        let tx = self.db.begin_read().map_err(db_err(&self.path))?;
        let table = tx.open_table(definition).map_err(db_err(&self.path))?;
        let mut records = Vec::new();
        for item in table.iter().map_err(db_err(&self.path))? {
            let (key, value) = item.map_err(db_err(&self.path))?;
            let record: T =
                serde_json::from_slice(value.value()).map_err(|e| StoreError::Corrupt {
                    path: self.path.clone(),
                    key: key.value().to_owned(),
                    message: e.to_string(),
                })?;
            records.push(record);
        }
        Ok(records)
    }

    fn put_in<T: Serialize>(
        &self,
        definition: TableDefinition<&str, &[u8]>,
        key: &str,
        record: &T,
    ) -> Result<(), StoreError> {
        let value = serde_json::to_vec(record).map_err(|e| StoreError::Encode {
            path: self.path.clone(),
            key: key.to_owned(),
            message: e.to_string(),
        })?;
        let tx = self.db.begin_write().map_err(db_err(&self.path))?;
        {
            let mut table = tx.open_table(definition).map_err(db_err(&self.path))?;
            table
                .insert(key, value.as_slice())
                .map_err(db_err(&self.path))?;
        }
        tx.commit().map_err(db_err(&self.path))
    }

    fn delete_in(
        &self,
        definition: TableDefinition<&str, &[u8]>,
        key: &str,
    ) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(db_err(&self.path))?;
        {
            let mut table = tx.open_table(definition).map_err(db_err(&self.path))?;
            table.remove(key).map_err(db_err(&self.path))?;
        }
        tx.commit().map_err(db_err(&self.path))
    }
}

fn db_err<E: Into<redb::Error>>(path: &Path) -> impl FnOnce(E) -> StoreError + '_ {
    move |e| StoreError::Db {
        path: path.to_owned(),
        source: Box::new(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdfast_core::{ContainerConfig, Intents, Presence, WallTime};
    use std::sync::Arc;

    fn record(id: &str) -> Record {
        Record {
            id: id.parse().expect("valid id"),
            name: format!("n-{id}"),
            config: Arc::new(ContainerConfig {
                image: "busybox".to_owned(),
                ..ContainerConfig::default()
            }),
            created_at: WallTime::from_unix_nanos(5),
            presence: Presence::Created,
            run: 2,
            pid: Some(42),
            started_at: None,
            began_at: None,
            start_sent: false,
            exit: None,
            restart_count: 1,
            intents: Intents::default(),
            network: holdfast_core::NetworkState::Detached,
            endpoints: Vec::new(),
            own_disconnected: false,
            allocation: None,
            health: None,
            create_sent_at: None,
            execs: Vec::new(),
            rootfs_mounted: false,
        }
    }

    #[test]
    fn records_survive_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.redb");
        {
            let store = Store::open(&path).expect("open");
            store.put(&record("a")).expect("put a");
            store.put(&record("b")).expect("put b");
            let mut b = record("b");
            b.run = 3;
            store.put(&b).expect("overwrite b");
            store.delete(&"a".parse().expect("id")).expect("delete a");
        }
        let store = Store::open(&path).expect("reopen");
        let loaded = store.load().expect("load").containers;
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].id.as_str(), "b");
        assert_eq!(loaded[0].run, 3);
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.redb");
        {
            let db = Database::create(&path).expect("create");
            let tx = db.begin_write().expect("tx");
            {
                let mut meta = tx.open_table(META).expect("meta");
                meta.insert(SCHEMA_KEY, SCHEMA_VERSION + 1).expect("insert");
            }
            tx.commit().expect("commit");
        }
        let err = Store::open(&path).expect_err("refused");
        assert!(matches!(err, StoreError::TooNew { .. }), "{err}");
        assert!(err.to_string().contains("newer"), "{err}");
    }

    #[test]
    fn an_unreadable_record_is_refused_not_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.redb");
        let store = Store::open(&path).expect("open");
        let tx = store.db.begin_write().expect("tx");
        {
            let mut t = tx.open_table(CONTAINERS).expect("table");
            t.insert("x", b"{not json".as_slice()).expect("insert");
        }
        tx.commit().expect("commit");
        let err = store.load().expect_err("corrupt");
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    }
}
