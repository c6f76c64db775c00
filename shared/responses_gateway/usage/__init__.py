"""Usage accounting: prices, the ledger entry of an ended response, budgets, the usage report.

Pure logic over the store's ledger records (:mod:`responses_gateway.store.base`): what a
response costs (:mod:`.pricing`), what it adds to the ledger (:mod:`.ledger`), whether a tenant
may call a model (:mod:`.budget`) and the OpenAI-shaped usage page (:mod:`.report`). No I/O but
through a :class:`~responses_gateway.store.base.LedgerStore` passed in; nothing here knows HTTP.
"""
