//! An in-memory mirror of `chrome.storage.local`, loaded once at start and written through.
//! Writes are issued in call order, so a later journal snapshot can never be overwritten by an
//! earlier one.

use std::cell::RefCell;

use serde_json::{Map, Value};

use super::io;

thread_local! {
    static CACHE: RefCell<Map<String, Value>> = RefCell::new(Map::new());
}

pub async fn load() -> Result<(), String> {
    let all = io::wait(io::storage_get_all()).await.map_err(|e| format!("storage read failed: {e:?}"))?;
    let Value::Object(map) = io::from_js(&all) else { return Ok(()) };
    CACHE.with(|c| *c.borrow_mut() = map);
    Ok(())
}

pub fn get(key: &str) -> Option<Value> {
    CACHE.with(|c| c.borrow().get(key).cloned())
}

/// Applies `chrome.storage.onChanged` from other contexts (e.g. the options page).
pub fn external_change(key: &str, value: Option<Value>) {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        match value {
            Some(v) => c.insert(key.to_string(), v),
            None => c.remove(key),
        };
    });
}

/// Writes `items`; the returned future resolves once storage has them.
pub fn set(items: Map<String, Value>) -> impl std::future::Future<Output = Result<(), String>> + use<> {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        for (k, v) in &items {
            c.insert(k.clone(), v.clone());
        }
    });
    let promise = io::storage_set(&io::to_js(&Value::Object(items)));
    async move { io::wait(promise).await.map(|_| ()).map_err(|e| format!("storage write failed: {e:?}")) }
}

pub fn remove(keys: &[String]) -> impl std::future::Future<Output = Result<(), String>> + use<> {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        for k in keys {
            c.remove(k);
        }
    });
    let promise = io::storage_remove(&io::to_js(&Value::from(keys.to_vec())));
    async move { io::wait(promise).await.map(|_| ()).map_err(|e| format!("storage remove failed: {e:?}")) }
}
