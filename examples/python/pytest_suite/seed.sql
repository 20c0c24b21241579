CREATE TABLE users(id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE, plan TEXT NOT NULL DEFAULT 'free');
CREATE TABLE invoices(id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), cents INTEGER NOT NULL);
INSERT INTO users(email, plan) VALUES ('ada@example.com', 'pro'), ('bob@example.com', 'free'), ('cy@example.com', 'free');
INSERT INTO invoices(user_id, cents) VALUES (1, 2900), (1, 2900), (2, 0);
