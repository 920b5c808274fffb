"""The typed model: what a spec means for every target (HugeCTR job, Triton plans, launch settings, ETL plan,
provenance), built and checked once (codegen.model.build); the renderers read only this."""
