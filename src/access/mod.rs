//! Who a caller is and what it may do: a role and the collections it reaches.
//!
//! [`Access`] is resolved once per request (the HTTP layer's `identify`) and handed to the
//! domain functions, which turn it into the collection filter of every query
//! ([`Access::reach`], a [`crate::collections::Reach`]): nothing is filtered after the fact. Roles nest: a reader
//! searches, lists, reads and downloads; a writer also uploads, deletes and reprocesses; an admin
//! does everything in every collection (jobs, schedules, models, tokens, metrics, collections).
//! [`tokens`] owns the `tokens` table.

pub mod tokens;

use serde::Serialize;
use sqlx::PgPool;

use crate::collections::{self, CollectionError, CollectionId, Reach};

/// What a token may do, from least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Reader,
    Writer,
    Admin,
}

impl Role {
    /// The stored and typed name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Writer => "writer",
            Role::Admin => "admin",
        }
    }

    /// Parses `reader`, `writer` or `admin`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "reader" => Some(Role::Reader),
            "writer" => Some(Role::Writer),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// A caller's role and the collections it reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    role: Role,
    /// `None`: every collection.
    collections: Option<Vec<CollectionId>>,
}

impl Access {
    /// Everything: the single-user mode on loopback, `DOCKET_API_TOKEN`, an admin token.
    pub fn admin() -> Self {
        Self {
            role: Role::Admin,
            collections: None,
        }
    }

    /// `role` in `collections` (none: all of them). An admin always reaches every collection.
    pub fn new(role: Role, collections: Option<Vec<CollectionId>>) -> Self {
        Self {
            role,
            collections: if role == Role::Admin {
                None
            } else {
                collections
            },
        }
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// The collections it is limited to; `None` when it reaches all.
    pub fn collections(&self) -> Option<&[CollectionId]> {
        self.collections.as_deref()
    }

    /// Whether it may read `collection`'s documents.
    pub fn can_read(&self, collection: CollectionId) -> bool {
        self.collections
            .as_ref()
            .is_none_or(|ids| ids.contains(&collection))
    }

    /// Whether it may upload into, delete from and reprocess in `collection`.
    pub fn can_write(&self, collection: CollectionId) -> bool {
        self.role >= Role::Writer && self.can_read(collection)
    }

    /// What one request covers when it asked for the collections `names` (none: every
    /// collection this caller may read). A name that is unknown, being deleted or outside the
    /// caller's reach is [`CollectionError::NotFound`]: the three answer alike.
    pub async fn reach(&self, pool: &PgPool, names: &[String]) -> Result<Reach, CollectionError> {
        if !names.is_empty() {
            let mut ids = Vec::with_capacity(names.len());
            for name in names {
                ids.push(self.readable(pool, name).await?);
            }
            ids.sort();
            ids.dedup();
            return Ok(Reach::only(ids));
        }
        if self.collections.is_none() && !collections::any_deleting(pool).await? {
            return Ok(Reach::everything());
        }
        Ok(Reach::only(
            collections::live(pool, self.collections.as_deref()).await?,
        ))
    }

    /// The live collection `name`, when this caller may read it.
    pub async fn readable(
        &self,
        pool: &PgPool,
        name: &str,
    ) -> Result<CollectionId, CollectionError> {
        match collections::find(pool, name).await? {
            Some(id) if self.can_read(id) => Ok(id),
            _ => Err(CollectionError::NotFound(name.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_nest_and_collections_limit_them() {
        let a = CollectionId(2);
        let b = CollectionId(3);
        let reader = Access::new(Role::Reader, Some(vec![a]));
        assert!(reader.can_read(a) && !reader.can_read(b) && !reader.can_write(a));
        let writer = Access::new(Role::Writer, Some(vec![a]));
        assert!(writer.can_write(a) && !writer.can_write(b) && !writer.is_admin());
        let everywhere = Access::new(Role::Writer, None);
        assert!(everywhere.can_write(b));
        // An admin is never limited, whatever it was created with.
        let admin = Access::new(Role::Admin, Some(vec![a]));
        assert!(admin.can_write(b) && admin.collections().is_none());
    }

    #[test]
    fn role_names_round_trip() {
        for role in [Role::Reader, Role::Writer, Role::Admin] {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert_eq!(Role::parse("root"), None);
    }
}
