//! The list of RDMA devices and opening one.

use std::ffi::CStr;
use std::io;

use ovbench_verbs_sys as sys;

use crate::{Context, VerbsError};

/// The devices `ibv_get_device_list` reports, freed on drop.
pub struct DeviceList {
    raw: *mut *mut sys::ibv_device,
    len: usize,
}

impl DeviceList {
    /// All RDMA devices of this machine. A machine with none (or with no
    /// kernel support at all) gives an empty list, not an error.
    pub fn new() -> Result<DeviceList, VerbsError> {
        let mut n: libc::c_int = 0;
        // SAFETY: `n` is a valid out-pointer; the returned array (or NULL) is ours to free.
        let raw = unsafe { sys::ibv_get_device_list(&mut n) };
        if raw.is_null() {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                // ENOSYS: no kernel RDMA support; ENOENT/ENODEV: nothing there.
                Some(libc::ENOSYS) | Some(libc::ENOENT) | Some(libc::ENODEV) | Some(0) | None => {
                    Ok(DeviceList { raw, len: 0 })
                }
                _ => Err(VerbsError::call("ibv_get_device_list", "this host", err)),
            };
        }
        Ok(DeviceList {
            raw,
            len: n.max(0) as usize,
        })
    }

    /// The device names (`rxe0`, `mlx5_0`, …) in the library's order.
    pub fn names(&self) -> Vec<String> {
        (0..self.len).map(|i| self.name(i)).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn name(&self, i: usize) -> String {
        // SAFETY: i < len, so raw[i] is a valid device pointer while the list lives;
        // ibv_get_device_name returns a NUL-terminated string owned by the device.
        unsafe {
            let dev = *self.raw.add(i);
            CStr::from_ptr(sys::ibv_get_device_name(dev))
                .to_string_lossy()
                .into_owned()
        }
    }

    /// Open `name`, or the first device when `None`. The error lists the
    /// devices that exist and says how to get one.
    pub fn open(&self, name: Option<&str>) -> Result<Context, VerbsError> {
        if self.len == 0 {
            let why = if std::path::Path::new("/sys/class/infiniband").exists() {
                String::new()
            } else {
                "; /sys/class/infiniband does not exist, so the kernel has no RDMA core loaded"
                    .to_string()
            };
            return Err(VerbsError::NoDevice { why });
        }
        let names = self.names();
        let idx = match name {
            None => 0,
            Some(n) => {
                names
                    .iter()
                    .position(|x| x == n)
                    .ok_or_else(|| VerbsError::DeviceNotFound {
                        wanted: n.to_string(),
                        found: names.clone(),
                    })?
            }
        };
        // SAFETY: idx < len; ibv_open_device returns an owned context or NULL.
        let raw = unsafe { sys::ibv_open_device(*self.raw.add(idx)) };
        let raw = VerbsError::created(raw, "ibv_open_device", &names[idx])?;
        // SAFETY: raw is a freshly opened, owned context.
        Ok(unsafe { Context::from_raw(raw, names[idx].clone()) })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: raw came from ibv_get_device_list and is freed once; opened
            // contexts stay valid after the list is freed (libibverbs documents this).
            unsafe { sys::ibv_free_device_list(self.raw) }
        }
    }
}
