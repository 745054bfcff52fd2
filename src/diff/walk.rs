//! Tree-walk differ (owned by the layer work).
