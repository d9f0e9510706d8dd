//! The scheduler's lock. Every rank runs on the runner's thread, so the
//! lock is never contended, yet a `Mutex` pays two atomic
//! read-modify-writes per call — and at a thousand ranks, each of them
//! also waits for the stores still missing the caches. [`Owned`] is bound
//! to the first thread that locks it: there a lock is a load and two
//! plain stores; any other thread panics instead of sharing the state.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// State locked by the one thread that uses it.
#[derive(Debug)]
pub(crate) struct Owned<T> {
    /// The owning thread's marker (see [`me`]); 0 before the first lock.
    owner: AtomicUsize,
    /// A guard exists (only the owner reads or writes it).
    held: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: `data` is reached only through a guard, and `lock` hands one
// out only on the owning thread and only while no other guard exists,
// so the value is never used from two threads nor aliased mutably; `T:
// Send` lets it be created on one thread and used on the owner.
unsafe impl<T: Send> Sync for Owned<T> {}

/// This thread's marker: the address of a thread-local, distinct among
/// live threads and never 0.
fn me() -> usize {
    thread_local!(static MARK: u8 = const { 0 });
    MARK.with(|m| m as *const u8 as usize)
}

impl<T> Owned<T> {
    pub(crate) fn new(v: T) -> Owned<T> {
        Owned {
            owner: AtomicUsize::new(0),
            held: AtomicBool::new(false),
            data: UnsafeCell::new(v),
        }
    }

    /// Lock it; the first call binds it to this thread.
    pub(crate) fn lock(&self) -> OwnedGuard<'_, T> {
        let me = me();
        let owner = self.owner.load(Ordering::Relaxed);
        if owner != me {
            let bound = self
                .owner
                .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed);
            assert!(
                bound.is_ok(),
                "the simulator's state is used from a second thread"
            );
        }
        assert!(
            !self.held.load(Ordering::Relaxed),
            "the simulator's state is locked twice"
        );
        self.held.store(true, Ordering::Relaxed);
        OwnedGuard {
            o: self,
            _here: PhantomData,
        }
    }
}

/// Access to the state until dropped (never leaves its thread: the raw
/// pointer marker makes it neither `Send` nor `Sync`).
pub(crate) struct OwnedGuard<'a, T> {
    o: &'a Owned<T>,
    _here: PhantomData<*const ()>,
}

impl<T> Drop for OwnedGuard<'_, T> {
    fn drop(&mut self) {
        self.o.held.store(false, Ordering::Relaxed);
    }
}

impl<T> Deref for OwnedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one and lives on the owner's
        // thread (see `Owned::lock`).
        unsafe { &*self.o.data.get() }
    }
}

impl<T> DerefMut for OwnedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`; `&mut self` makes this borrow unique.
        unsafe { &mut *self.o.data.get() }
    }
}
