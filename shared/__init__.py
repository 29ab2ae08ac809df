"""Code that several harnessrl services use: settings, data model, object store, queues, wire schemas."""
