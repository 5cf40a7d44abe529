//! Why a reconcile could not finish: the Kubernetes API failed, or something passing (a source
//! being read, a namespace being deleted elsewhere) asks for another try. Either way the
//! preview is looked at again shortly; nothing here is a verdict on the preview itself.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Transient(String),
}
