-- The order a listing of the served mail pages through: newest received
-- first (the Received header, else the server's internal date, else when
-- it was first stored), the id breaking ties. With it a page reads its
-- rows in order and stops, rather than sorting a whole mailbox per page.
CREATE INDEX ix_stored_emails_listing_order
    ON stored_emails ((coalesce(received_at, internal_date, first_stored_at)) DESC, id DESC);
