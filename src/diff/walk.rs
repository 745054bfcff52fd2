//! Tree-walk differ (owned by the layer work; this placeholder only fixes
//! the name other modules refer to).
use super::*;

#[derive(Debug, Default, Clone)]
pub struct TreeWalkDiffer;

impl TreeWalkDiffer {
    pub fn new() -> Self {
        TreeWalkDiffer
    }
}

impl Differ for TreeWalkDiffer {
    fn name(&self) -> &'static str {
        "tree-walk"
    }
    fn changes(&self, _: Option<SnapshotRef<'_>>, _: SnapshotRef<'_>) -> Result<Vec<Change>, DiffError> {
        Err(DiffError::Backend("the tree-walk differ is not written yet".into()))
    }
}
