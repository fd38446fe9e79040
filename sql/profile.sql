-- duckanon: detection of identifying columns (issue 20), in SQL only.
--
-- Uses no macro of the other files (it loads after checks.sql, in sorted order) and keeps their
-- conventions: TEMP macros only, the table name is a string (anything query_table() accepts),
-- lambdas use the `lambda x: ...` syntax, every CTE name starts with `__anon_` (a CTE shadows a catalog table of the
-- same name for query_table()), and column names starting with `__anon_` are reserved.
--
-- anon_profile(tbl) profiles every column of a table: NULL share, distinct ratio, unique share, the
-- patterns its values match (e-mail, phone, SSN, IBAN, card, IP, URL, dates, names, ZIP codes, ...),
-- a suggested role and the HIPAA Safe Harbor identifier kinds it holds. anon_safe_harbor(tbl) lists
-- the Safe Harbor kinds (45 CFR 164.514(b)(2)(i) (A)-(R), as in ARX's RiskModelHIPAASafeHarbor) the
-- table still contains. Neither macro returns a data value: only names, kinds, counts and shares.
--
-- Sample: the values are read from a reservoir sample of at most 10,000 rows, seeded
-- (REPEATABLE (20)), so a profile of a table with millions of rows reads it once and evaluates the
-- patterns on at most 10,000 values per column. Tables of up to 10,000 rows are read whole. The result
-- states both the table's rows (`rows`) and the rows profiled (`sample_rows`); every share is a share
-- of the sample. DuckDB's reservoir sample with a seed is the same from run to run on one machine,
-- but not promised across thread counts or versions. On a sample the distinct ratio and the unique
-- share are higher than on the whole table (values seen once in the sample may repeat outside it).
--
-- Value patterns (anon_value_patterns) are full matches of the trimmed VARCHAR form of a value:
--   email        local@domain.tld (RFC 5322 "dot-atom" local part, letters-only top-level domain)
--   phone        North American numbers with separators ((617) 555-0123, 617-555-0123, 617.555.0123,
--                +1 617 555 0123) or international numbers starting with + (8 to 15 digits); plain
--                digit runs only where the column name says phone/fax (7 to 15 digits)
--   us_ssn       ddd-dd-dddd or ddd dd dddd, area not 000/666/9xx, group not 00, serial not 0000;
--                plain 9 digits only where the column name says ssn
--   iban         country code, 2 check digits, 11-30 letters/digits (spaces allowed), ISO 7064 mod-97
--   credit_card  13-19 digits (spaces or dashes allowed) with a card network's prefix and a valid Luhn
--                check digit
--   ip_address   dotted IPv4 (each part 0-255) or IPv6 (full or compressed)
--   url          http(s):// or ftp:// with a host name or IPv4 address, or www.host.tld
--   date         DATE/TIMESTAMP columns, or strings in a common date(-time) format with a year
--                1800-2200 (ISO, m/d/Y, d.m.Y, d-m-Y, d Mon Y, Mon d, Y, ...); date_of_birth instead
--                of date where the column name says birth/dob
-- Patterns that need the column name too (values alone are ordinary words or numbers):
--   person_name  the name says a person's name (name, first_name, surname, ...) and the value is 1-4
--                words of letters (apostrophes, dots, hyphens)
--   zip_code     5-digit or ZIP+4 codes in a text column, or, where the name says zip/postal, also
--                3-digit ZIP prefixes (021, 021**), UK and Canadian postcodes and numeric ZIPs
--   age          the name says age and the value is a number from 0 to 130
--   sex          the name says sex/gender and the value is a sex/gender word or letter, or, whatever
--                the name, at least 90% of values are M/F/male/female/man/woman in 2 to 5 distinct values
--   free_text    a value of at least 5 words and 20 characters (not flagged beside person_name)
-- A column is flagged with a pattern when at least half of its non-NULL sampled values match it.


-- ------------------------------------------------------------------ value checks (scalar macros)

-- anon_luhn_ok(digits) -> BOOLEAN: the digit string passes the Luhn (mod 10) check.
CREATE OR REPLACE TEMP MACRO anon_luhn_ok(digits) AS
    list_sum(list_transform(list_reverse(string_split(digits, '')),
                            lambda d, i: CASE WHEN i % 2 = 0
                                              THEN d::INTEGER * 2 - CASE WHEN d::INTEGER >= 5 THEN 9 ELSE 0 END
                                              ELSE d::INTEGER END)) % 10 = 0;

-- anon_iban_ok(s) -> BOOLEAN: s (upper case, no spaces, shape already checked) passes the ISO 7064
-- mod-97 check: the first 4 characters moved to the end, letters A..Z read as 10..35, the number mod
-- 97 is 1. Computed digit by digit (the number has up to 68 digits).
CREATE OR REPLACE TEMP MACRO anon_iban_ok(s) AS
    list_reduce(list_transform(string_split(substr(s, 5) || substr(s, 1, 4), ''),
                               lambda c: CASE WHEN c BETWEEN '0' AND '9' THEN c::INTEGER ELSE ascii(c) - 55 END),
                lambda acc, x: (acc * CASE WHEN x >= 10 THEN 100 ELSE 10 END + x) % 97, 0) = 1;

-- anon_ssn_digits_ok(d) -> BOOLEAN: 9 digits that can be a US SSN (area not 000, 666 or 900-999,
-- group not 00, serial not 0000).
CREATE OR REPLACE TEMP MACRO anon_ssn_digits_ok(d) AS
    regexp_full_match(d, '[0-8][0-9]{8}') AND substr(d, 1, 3) NOT IN ('000', '666')
    AND substr(d, 4, 2) <> '00' AND substr(d, 6, 4) <> '0000';

CREATE OR REPLACE TEMP MACRO anon_is_email(v) AS
    regexp_full_match(trim(v::VARCHAR),
        '[A-Za-z0-9!#$%&''*+/=?^_{|}~-]+(\.[A-Za-z0-9!#$%&''*+/=?^_{|}~-]+)*'
        || '@([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}');

CREATE OR REPLACE TEMP MACRO anon_is_phone(v) AS
    CASE WHEN regexp_full_match(trim(v::VARCHAR),
                                '(\+?1[ .-]?)?(\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[ .-])[2-9][0-9]{2}[ .-][0-9]{4}')
         THEN true
         WHEN regexp_full_match(trim(v::VARCHAR), '\+[1-9][0-9]{0,2}([ .-]?\(?[0-9]{1,5}\)?){1,6}')
         THEN length(regexp_replace(v::VARCHAR, '[^0-9]', '', 'g')) BETWEEN 8 AND 15
         ELSE false END;

CREATE OR REPLACE TEMP MACRO anon_is_us_ssn(v) AS
    CASE WHEN regexp_full_match(trim(v::VARCHAR), '[0-9]{3}-[0-9]{2}-[0-9]{4}|[0-9]{3} [0-9]{2} [0-9]{4}')
         THEN anon_ssn_digits_ok(regexp_replace(v::VARCHAR, '[^0-9]', '', 'g'))
         ELSE false END;

CREATE OR REPLACE TEMP MACRO anon_is_iban(v) AS
    CASE WHEN regexp_full_match(upper(replace(trim(v::VARCHAR), ' ', '')), '[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}')
         THEN anon_iban_ok(upper(replace(trim(v::VARCHAR), ' ', '')))
         ELSE false END;

-- card networks by prefix and length: Visa, Mastercard (51-55, 2221-2720), American Express, Discover,
-- Diners Club, JCB, UnionPay, Maestro.
CREATE OR REPLACE TEMP MACRO anon_is_credit_card(v) AS
    CASE WHEN regexp_full_match(trim(v::VARCHAR), '[0-9]{4}([ -]?[0-9]{2,7}){2,4}')
              AND regexp_full_match(regexp_replace(v::VARCHAR, '[^0-9]', '', 'g'),
                  '4[0-9]{12}([0-9]{3}){0,2}'
                  || '|(5[1-5][0-9]{2}|222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)[0-9]{12}'
                  || '|3[47][0-9]{13}|(6011|65[0-9]{2}|64[4-9][0-9])[0-9]{12,15}|3(0[0-5]|[68][0-9])[0-9]{11,16}'
                  || '|35(2[89]|[3-8][0-9])[0-9]{12,15}|62[0-9]{14,17}'
                  || '|(5018|5020|5038|5893|6304|6759|676[1-3])[0-9]{8,15}')
         THEN anon_luhn_ok(regexp_replace(v::VARCHAR, '[^0-9]', '', 'g'))
         ELSE false END;

CREATE OR REPLACE TEMP MACRO anon_is_ip(v) AS
    regexp_full_match(trim(v::VARCHAR),
        '((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])')
    OR regexp_full_match(trim(v::VARCHAR),
        '([0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}|([0-9A-Fa-f]{1,4}:){1,7}:|([0-9A-Fa-f]{1,4}:){1,6}:[0-9A-Fa-f]{1,4}'
        || '|([0-9A-Fa-f]{1,4}:){1,5}(:[0-9A-Fa-f]{1,4}){1,2}|([0-9A-Fa-f]{1,4}:){1,4}(:[0-9A-Fa-f]{1,4}){1,3}'
        || '|([0-9A-Fa-f]{1,4}:){1,3}(:[0-9A-Fa-f]{1,4}){1,4}|([0-9A-Fa-f]{1,4}:){1,2}(:[0-9A-Fa-f]{1,4}){1,5}'
        || '|[0-9A-Fa-f]{1,4}:(:[0-9A-Fa-f]{1,4}){1,6}|:(:[0-9A-Fa-f]{1,4}){1,7}');

CREATE OR REPLACE TEMP MACRO anon_is_url(v) AS
    regexp_full_match(trim(v::VARCHAR),
        '(?i)((https?|ftp)://([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}'
        || '|(https?|ftp)://[0-9]{1,3}(\.[0-9]{1,3}){3}'
        || '|www\.([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63})(:[0-9]{1,5})?([/?#][^\s]*)?');

-- anon_is_date(v) -> BOOLEAN: v (a string) is a date or a date and time in a common format, year
-- 1800-2200. A trailing time zone offset after a time is ignored.
CREATE OR REPLACE TEMP MACRO anon_is_date(v) AS
    CASE WHEN length(trim(v::VARCHAR)) BETWEEN 6 AND 40
              AND regexp_matches(trim(v::VARCHAR), '^([0-9]{1,4}[-/. ]|[A-Za-z]{3,9} [0-9])')
              AND regexp_matches(trim(v::VARCHAR), '(^|[^0-9])[0-9]{4}([^0-9]|$)')
         THEN coalesce(year(try_strptime(
             regexp_replace(trim(v::VARCHAR),
                            '([0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?) ?(Z|[+-][0-9]{2}(:?[0-9]{2})?)$', '\1'),
             ['%Y-%m-%d', '%m/%d/%Y', '%d.%m.%Y', '%d/%m/%Y', '%Y/%m/%d', '%d-%m-%Y', '%Y.%m.%d',
              '%d %b %Y', '%d-%b-%Y', '%d %B %Y', '%b %d, %Y', '%B %d, %Y',
              '%Y-%m-%d %H:%M', '%Y-%m-%d %H:%M:%S', '%Y-%m-%d %H:%M:%S.%f', '%Y-%m-%dT%H:%M:%S',
              '%Y-%m-%dT%H:%M:%S.%f', '%m/%d/%Y %H:%M', '%m/%d/%Y %H:%M:%S', '%d.%m.%Y %H:%M', '%d.%m.%Y %H:%M:%S']))
             BETWEEN 1800 AND 2200, false)
         ELSE false END;

-- anon_value_patterns(v) -> VARCHAR[]: the patterns a single value matches on its own (without a
-- column name): email, phone, us_ssn, iban, credit_card, ip_address, url, date. For finding the
-- rows behind a profile: SELECT * FROM t WHERE list_contains(anon_value_patterns(notes), 'email').
CREATE OR REPLACE TEMP MACRO anon_value_patterns(v) AS
    list_filter([CASE WHEN anon_is_email(v) THEN 'email' END, CASE WHEN anon_is_phone(v) THEN 'phone' END,
                 CASE WHEN anon_is_us_ssn(v) THEN 'us_ssn' END, CASE WHEN anon_is_iban(v) THEN 'iban' END,
                 CASE WHEN anon_is_credit_card(v) THEN 'credit_card' END,
                 CASE WHEN anon_is_ip(v) THEN 'ip_address' END, CASE WHEN anon_is_url(v) THEN 'url' END,
                 CASE WHEN anon_is_date(v) THEN 'date' END],
                lambda p: p IS NOT NULL);

-- anon_profile_pct(x) -> VARCHAR: a share as a percentage with one decimal ('97.5%').
CREATE OR REPLACE TEMP MACRO anon_profile_pct(x) AS printf('%.1f%%', 100 * x);


-- ------------------------------------------------------------------ the profile

-- Suggested role, the first rule that applies:
--   identifier        a direct identifier pattern (email, phone, us_ssn, iban, credit_card, ip_address,
--                     url, person_name); a column name that says a direct identifier (name, phone, fax,
--                     e-mail, SSN, medical record, health plan, account or card number, license,
--                     vehicle, device, URL, IP, biometric, photo, street address or coordinates); or a
--                     record number: at least 50 sampled values, all distinct, integers or codes
--                     without spaces (not decimals, not dates) and no other pattern, or a name ending
--                     in id/no/number with at least 10% distinct values
--   quasi-identifier  a date, date_of_birth, zip_code, age or sex pattern
--   sensitive         the name says diagnosis, disease, medication, treatment, salary, income,
--                     religion, HIV, ... (left to the user: never from values)
--   quasi-identifier  the name says birth, age, sex/gender, zip/postal, a place (city, county,
--                     address, ...), race, ethnicity, marital status, education, occupation,
--                     nationality, language, state, country or region
--   unknown           free text (it may hold anything: review it by hand), or no non-NULL value
--   keep              anything else
-- Column names are matched on whole words of their snake_case form (firstName, "First Name" and
-- first_name alike); identifier names must end with the word (email_address, home_phone, but not
-- email_sent or phone_type); a BOOLEAN column gets no identifier hint from its name.
--
-- HIPAA Safe Harbor kinds of a column (hipaa): from the value patterns where there is one, else from
-- the column name (as ARX does): names (person_name, or the name); geographic subdivisions (5-digit
-- ZIP, ZIP+4 or another full postcode, a 3-digit ZIP area of 20,000 or fewer people, i.e. one of
-- the 17 areas of the 2000 census that Safe Harbor requires to be published as 000, or a place name
-- smaller than a state); dates (date or date_of_birth patterns, ages over 89 in an age column, birth
-- years of people now over 89); telephone and fax numbers; e-mail addresses; SSNs; medical record,
-- health plan beneficiary, account (IBAN, card), certificate/license, vehicle and device numbers;
-- URLs; IP addresses; biometric identifiers; photographs; and, when none of these applies, a record
-- number as "any other unique identifying number". Allowed, so not reported: a year alone, a state,
-- a 3-digit ZIP area of more than 20,000 people.

-- anon_profile_details(tbl): anon_profile plus the internal per-column facts (name hints, pattern
-- shares, the Safe Harbor findings with evidence as a list of structs `__hipaa`), for anon_profile
-- and anon_safe_harbor.
CREATE OR REPLACE TEMP MACRO anon_profile_details(tbl) AS TABLE
    WITH __anon_sample AS (   -- at most 10,000 rows, seeded
        SELECT * FROM query_table(tbl) USING SAMPLE reservoir(10000 ROWS) REPEATABLE (20)
    ), __anon_types AS (      -- one row: each column's type under its name (also for an empty table)
        SELECT typeof(COLUMNS(* EXCLUDE (__anon_one)))
        FROM (SELECT 1 AS __anon_one) LEFT JOIN (SELECT * FROM query_table(tbl) LIMIT 1) ON true
    ), __anon_named AS (      -- per column: position, name, type, w = '_' || snake_case name || '_'
        SELECT pos, column_name, column_type,
               '_' || lower(regexp_replace(regexp_replace(column_name, '([a-z0-9])([A-Z])', '\1_\2', 'g'),
                                           '[^A-Za-z0-9]+', '_', 'g')) || '_' AS w
        FROM (
            SELECT unnest(struct_keys(__anon_t)) AS column_name,
                   unnest(list_value(*COLUMNS(*))) AS column_type,
                   generate_subscripts(struct_keys(__anon_t), 1) AS pos
            FROM __anon_types AS __anon_t
        )
    ), __anon_cols AS (       -- name hints: what the column name says (matched on whole words of w);
                              -- a BOOLEAN column holds no identifier, so it gets no identifier hint (wi)
        SELECT *,
            regexp_matches(wi, '^_((patient|person|customer|client|contact|employee|member|holder|'
                || 'account_holder|card_holder|cardholder|owner|spouse|partner|mother|father|parent|guardian|'
                || 'next_of_kin|emergency_contact|physician|doctor|provider|nurse|sender|recipient)_)?'
                || '((first|last|given|family|middle|maiden|full|sur|fore|nick|christian|birth)_?)?names?_$'
                || '|_(surname|forename|firstname|lastname|fullname|givenname|familyname|middlename|maidenname|'
                || 'vorname|nachname|prenom|apellido)_') AS h_name,
            regexp_matches(wi, '_(dob|birth|births|birthday|birthdate|dateofbirth|born|bday|geburtsdatum|yob)_')
                AND NOT regexp_matches(wi, 'birth_?(place|country|city|town|state|weight|order|rank|name)')
                AS h_birth,
            regexp_matches(wi, '_(age|ages)_') AS h_age,
            regexp_matches(w, '_(sex|gender|geschlecht)_') AS h_sex,
            regexp_matches(wi, '_(zip[0-9]?|zipcode|postal|postcode|plz|postleitzahl)(_?code)?_$') AS h_zip,
            regexp_matches(wi, '_(phone|phones|telephone|tel|mobile|cellphone|phonenumber|telefon)'
                || '(_?(number|no|nr|num))?_$') AS h_phone,
            regexp_matches(wi, '_(fax|telefax)(_?(number|no|nr|num))?_$') AS h_fax,
            regexp_matches(wi, '_(e_?mail|mail)(_?(address|addr))?_$|_emailaddress_$') AS h_email,
            regexp_matches(wi, '_(ssn|sin|itin)_$|social_?security(_?(number|no|nr|num))?_$') AS h_ssn,
            regexp_matches(wi, '_mrn_|medical_?record|_patient_?(id|no|nr|num|number)_$'
                || '|_chart_?(id|no|nr|num|number)_$') AS h_mrn,
            regexp_matches(wi, 'health_?plan|_(member|subscriber|beneficiary|insurance|insured|insurer|policy|'
                || 'medicare|medicaid)_?(id|no|nr|num|number)_$|_(medicare|medicaid)_$') AS h_health_plan,
            regexp_matches(wi, '_(account|acct|iban|accountnumber)(_?(id|no|nr|num|number))?_$|credit_?card|'
                || '_card_?(no|nr|num|number)_$|_cc_?(no|num|number)_$') AS h_account,
            regexp_matches(wi, '_(license|licence|certificate|cert|permit|passport|npi|dea)'
                || '(_?(id|no|nr|num|number))?_$') AS h_license,
            regexp_matches(wi, '_(vin|vehicle|vehicle_?id|license_?plate|licence_?plate|plate|number_?plate|'
                || 'kennzeichen)(_?(id|no|nr|num|number))?_$') AS h_vehicle,
            regexp_matches(wi, '_(device|device_?id|serial|serial_?number|imei|imsi|meid|udid|mac|mac_?address|'
                || 'idfa|gaid|advertising_?id)(_?(id|no|nr|num|number))?_$') AS h_device,
            regexp_matches(wi, '_(url|urls|uri|website|web_?site|homepage|home_?page|web_?page|link|'
                || 'web_?address)_$') AS h_url,
            regexp_matches(wi, '_(ip|ipv4|ipv6|ip_?addr|ip_?address|ipaddress)_$') AS h_ip,
            regexp_matches(wi, '_(fingerprint|finger_print|retina|retinal|iris|voiceprint|voice_print|biometric|'
                || 'biometrics|face_template|palmprint|palm_print|dna)_') AS h_biometric,
            regexp_matches(wi, '_(photo|photos|photograph|picture|image|img|portrait|selfie|headshot|mugshot|'
                || 'face_image)_') AS h_photo,
            regexp_matches(regexp_replace(wi, '_(e_?mail|ip|mac|web|internet)_?address', '_', 'g'),
                '_(address|addr|street|street_address|city|town|county|district|municipality|village|neighborhood|'
                || 'neighbourhood|borough|precinct|suburb|latitude|longitude|lat|lon|lng|gps|geo|geolocation|'
                || 'coordinates|census_tract|tract)_') AS h_geo,
            regexp_matches(regexp_replace(wi, '_(e_?mail|ip|mac|web|internet)_?address', '_', 'g'),
                '_(address|addr|street|street_address|latitude|longitude|lat|lon|lng|gps|geolocation|'
                || 'coordinates)_') AS h_address,
            regexp_matches(w, '_(race|ethnicity|ethnic|marital|marital_status|education|occupation|profession|job|'
                || 'nationality|citizenship|native_country|language|state|country|region|birth_?place|'
                || 'place_of_birth)_') AS h_demographic,
            regexp_matches(w, 'diagnos|disease|illness|disorder|_icd|medication|prescription|_drugs?_|treatment|'
                || 'therapy|symptom|_hiv|cancer|condition|salary|income|_wages?_|earnings|religio|sexual|political|'
                || 'criminal|'
                || 'conviction|genetic|disabilit|pregnan|health_status|_bmi_|blood_type') AS h_sensitive,
            regexp_matches(wi, '_(id|no|nr|num|number|uuid|guid|key|identifier)_$') AS h_id,
            regexp_full_match(column_type, 'U?(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT)|VARINT|BIGNUM') AS t_int,
            regexp_full_match(column_type, 'U?(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT)|VARINT|BIGNUM|DECIMAL.*|'
                                           || 'DOUBLE|FLOAT|REAL') AS t_num,
            regexp_full_match(column_type, 'DATE|TIMESTAMP.*') AS t_date
        FROM (SELECT *, CASE WHEN column_type = 'BOOLEAN' THEN '_' ELSE w END AS wi FROM __anon_named)
    ), __anon_vals AS (       -- distinct non-NULL (column, value) of the sample, with their counts
        SELECT pos, v, count(*) AS n
        FROM (
            SELECT generate_subscripts(__v, 1) AS pos, unnest(__v) AS v
            FROM (SELECT list_value(*COLUMNS(*)) AS __v FROM (SELECT COLUMNS(*)::VARCHAR FROM __anon_sample))
        )
        WHERE v IS NOT NULL
        GROUP BY ALL
    ), __anon_feat AS (       -- what each distinct value matches
        SELECT c.pos, n,
            anon_is_email(t) AS f_email,
            CASE WHEN anon_is_phone(t) THEN true
                 WHEN (h_phone OR h_fax) AND regexp_full_match(t, '\+?[0-9 ().-]{7,24}')
                 THEN length(regexp_replace(t, '[^0-9]', '', 'g')) BETWEEN 7 AND 15
                 ELSE false END AS f_phone,
            anon_is_us_ssn(t) OR (h_ssn AND length(t) = 9 AND anon_ssn_digits_ok(t)) AS f_ssn,
            anon_is_iban(t) AS f_iban,
            anon_is_credit_card(t) AS f_card,
            anon_is_ip(t) AS f_ip,
            anon_is_url(t) AS f_url,
            t_date OR (NOT t_num AND anon_is_date(t)) AS f_date,
            h_name AND regexp_full_match(t, '\p{L}[\p{L}''.-]*( +\p{L}[\p{L}''.-]*){0,3}') AS f_person,
            -- ZIP: 5-digit or ZIP+4 in text, and with a zip/postal name also other postcodes and numbers
            (NOT t_num AND regexp_full_match(t, '[0-9]{5}(-[0-9]{4})?'))
                OR (h_zip AND (regexp_full_match(upper(t), '[A-Z]{1,2}[0-9][A-Z0-9]? ?[0-9][A-Z]{2}'
                                                            || '|[A-Z][0-9][A-Z] ?[0-9][A-Z][0-9]')
                               OR (t_int AND try_cast(t AS HUGEINT) BETWEEN 1000 AND 99999))) AS f_zip_full,
            h_zip AND (regexp_full_match(t, '[0-9]{3}(\*\*|xx|XX)?')
                       OR (t_int AND try_cast(t AS HUGEINT) BETWEEN 0 AND 999))
                AS f_zip3,
            -- the 17 three-digit ZIP areas of 20,000 or fewer people (2000 census), which Safe Harbor
            -- requires to be published as 000
            h_zip AND (regexp_full_match(t, '[0-9]{3}(\*\*|xx|XX)?')
                       OR (t_int AND try_cast(t AS HUGEINT) BETWEEN 0 AND 999))
                AND CASE WHEN t_int THEN lpad(t, 3, '0') ELSE substr(t, 1, 3) END
                    IN ('036', '059', '063', '102', '203', '556', '692', '790', '821', '823', '830', '831', '878',
                        '879', '884', '890', '893') AS f_zip_restricted,
            h_age AND regexp_full_match(t, '[0-9]{1,3}(\.[0-9]+)?') AND try_cast(t AS DOUBLE) <= 130 AS f_age,
            h_age AND regexp_full_match(t, '[0-9]{1,3}(\.[0-9]+)?') AND try_cast(t AS DOUBLE) > 89
                AND try_cast(t AS DOUBLE) <= 130 AS f_age_over_89,
            h_birth AND regexp_full_match(t, '(18|19|20)[0-9]{2}') AND try_cast(t AS INTEGER) <= year(current_date)
                AS f_birth_year,
            h_birth AND regexp_full_match(t, '(18|19|20)[0-9]{2}')
                AND try_cast(t AS INTEGER) <= year(current_date) - 90
                AS f_birth_year_over_89,
            lower(t) IN ('m', 'f', 'male', 'female', 'man', 'woman') AS f_sex_core,
            h_sex AND lower(t) IN ('m', 'f', 'male', 'female', 'man', 'woman', 'men', 'women', 'w', 'x', 'd', 'u',
                                   'o', 'other', 'unknown', 'non-binary', 'nonbinary', 'diverse', 'intersex', 'mann',
                                   'frau', 'maennlich', 'weiblich', 'divers') AS f_sex_named,
            length(t) >= 20 AND len(regexp_split_to_array(t, '\s+')) >= 5 AND regexp_matches(t, '\p{L}{3}') AS f_text,
            regexp_full_match(t, '[A-Za-z0-9][A-Za-z0-9_:./#-]*') AS f_code
        FROM (SELECT pos, trim(v) AS t, n FROM __anon_vals) AS __anon_v
        JOIN __anon_cols AS c ON c.pos = __anon_v.pos
    ), __anon_agg AS (        -- per column: counts and the share of non-NULL values matching each pattern
        SELECT pos,
               sum(n) AS nonnull, count(*) AS distinct_values, count(*) FILTER (WHERE n = 1) AS singles,
               sum(n) FILTER (WHERE f_email) / sum(n) AS s_email,
               sum(n) FILTER (WHERE f_phone) / sum(n) AS s_phone,
               sum(n) FILTER (WHERE f_ssn) / sum(n) AS s_ssn,
               sum(n) FILTER (WHERE f_iban) / sum(n) AS s_iban,
               sum(n) FILTER (WHERE f_card) / sum(n) AS s_card,
               sum(n) FILTER (WHERE f_ip) / sum(n) AS s_ip,
               sum(n) FILTER (WHERE f_url) / sum(n) AS s_url,
               sum(n) FILTER (WHERE f_date) / sum(n) AS s_date,
               sum(n) FILTER (WHERE f_person) / sum(n) AS s_person,
               sum(n) FILTER (WHERE f_zip_full) / sum(n) AS s_zip_full,
               sum(n) FILTER (WHERE f_zip_full OR f_zip3) / sum(n) AS s_zip,
               sum(n) FILTER (WHERE f_zip_restricted) / sum(n) AS s_zip_restricted,
               sum(n) FILTER (WHERE f_age) / sum(n) AS s_age,
               sum(n) FILTER (WHERE f_age_over_89) / sum(n) AS s_age_over_89,
               sum(n) FILTER (WHERE f_birth_year) / sum(n) AS s_birth_year,
               sum(n) FILTER (WHERE f_birth_year_over_89) / sum(n) AS s_birth_year_over_89,
               sum(n) FILTER (WHERE f_sex_core) / sum(n) AS s_sex_core,
               sum(n) FILTER (WHERE f_sex_named) / sum(n) AS s_sex_named,
               sum(n) FILTER (WHERE f_text) / sum(n) AS s_text,
               sum(n) FILTER (WHERE f_code) / sum(n) AS s_code
        FROM __anon_feat
        GROUP BY pos
    ), __anon_flags AS (      -- per column: the shares of the flagged patterns (NULL = not flagged)
        SELECT c.*, coalesce(a.nonnull, 0) AS nonnull, coalesce(a.distinct_values, 0) AS distinct_values,
               coalesce(a.singles, 0) AS singles, a.s_zip_full, a.s_zip_restricted, a.s_age_over_89,
               a.s_birth_year, a.s_birth_year_over_89, a.s_code,
               CASE WHEN a.s_email >= 0.5 THEN a.s_email END AS p_email,
               CASE WHEN a.s_phone >= 0.5 THEN a.s_phone END AS p_phone,
               CASE WHEN a.s_ssn >= 0.5 THEN a.s_ssn END AS p_ssn,
               CASE WHEN a.s_iban >= 0.5 THEN a.s_iban END AS p_iban,
               CASE WHEN a.s_card >= 0.5 THEN a.s_card END AS p_card,
               CASE WHEN a.s_ip >= 0.5 THEN a.s_ip END AS p_ip,
               CASE WHEN a.s_url >= 0.5 THEN a.s_url END AS p_url,
               CASE WHEN a.s_date >= 0.5 AND NOT h_birth THEN a.s_date END AS p_date,
               CASE WHEN a.s_date >= 0.5 AND h_birth THEN a.s_date END AS p_dob,
               CASE WHEN a.s_person >= 0.5 THEN a.s_person END AS p_person,
               CASE WHEN a.s_zip >= 0.5 THEN a.s_zip END AS p_zip,
               CASE WHEN a.s_age >= 0.5 THEN a.s_age END AS p_age,
               CASE WHEN h_sex AND a.s_sex_named >= 0.5 THEN a.s_sex_named
                    WHEN a.s_sex_core >= 0.9 AND a.distinct_values BETWEEN 2 AND 5 THEN a.s_sex_core END AS p_sex,
               CASE WHEN a.s_text >= 0.5 AND coalesce(a.s_person, 0) < 0.5 THEN a.s_text END AS p_text
        FROM __anon_cols AS c LEFT JOIN __anon_agg AS a ON a.pos = c.pos
    ), __anon_judged AS (     -- record numbers, the Safe Harbor findings
        SELECT *,
               -- a record number: every sampled value distinct (at least 50 of them), integers or codes
               -- (no spaces), and no other pattern; or a name ending in id/no/number with 10%+ distinct codes
               nonnull >= 50 AND s_code = 1 AND NOT regexp_full_match(column_type, 'DECIMAL.*|DOUBLE|FLOAT|REAL')
                   AND coalesce(p_email, p_phone, p_ssn, p_iban, p_card, p_ip, p_url, p_date, p_dob, p_person,
                                p_zip, p_age, p_sex, p_text) IS NULL
                   AND (singles = nonnull OR (h_id AND distinct_values >= 0.1 * nonnull)) AS record_number,
               coalesce(p_email, p_phone, p_ssn, p_iban, p_card, p_ip, p_url, p_person) IS NOT NULL AS direct_pattern
        FROM __anon_flags
    ), __anon_kinds AS (
        SELECT *,
            list_filter([
                CASE WHEN p_person IS NOT NULL THEN {'no': 1, 'kind': 'names', 'evidence': 'person_name on '
                                                    || anon_profile_pct(p_person) || ' of values and the column name'}
                     WHEN h_name THEN {'no': 1, 'kind': 'names', 'evidence': 'column name'} END,
                CASE WHEN p_zip IS NOT NULL AND s_zip_full > 0 THEN {'no': 2, 'kind': 'geographic_subdivisions',
                         'evidence': 'full ZIP/postal codes on ' || anon_profile_pct(s_zip_full) || ' of values'}
                     WHEN p_zip IS NOT NULL AND s_zip_restricted > 0 THEN {'no': 2, 'kind': 'geographic_subdivisions',
                         'evidence': '3-digit ZIP areas of 20,000 or fewer people on '
                                     || anon_profile_pct(s_zip_restricted)
                                     || ' of values'}
                     WHEN h_zip AND p_zip IS NULL THEN {'no': 2, 'kind': 'geographic_subdivisions',
                                                        'evidence': 'column name'}
                     WHEN h_geo THEN {'no': 2, 'kind': 'geographic_subdivisions', 'evidence': 'column name'} END,
                CASE WHEN coalesce(p_dob, p_date) IS NOT NULL THEN {'no': 3, 'kind': 'dates',
                         'evidence': CASE WHEN p_dob IS NOT NULL THEN 'date_of_birth' ELSE 'date' END || ' on '
                                     || anon_profile_pct(coalesce(p_dob, p_date)) || ' of values'}
                     WHEN coalesce(s_age_over_89, 0) > 0 AND p_age IS NOT NULL THEN {'no': 3, 'kind': 'dates',
                         'evidence': 'ages over 89 on ' || anon_profile_pct(s_age_over_89) || ' of values'}
                     WHEN coalesce(s_birth_year_over_89, 0) > 0 AND s_birth_year >= 0.5
                     THEN {'no': 3, 'kind': 'dates',
                         'evidence': 'birth years of people over 89 on ' || anon_profile_pct(s_birth_year_over_89)
                                     || ' of values'}
                     WHEN h_birth AND coalesce(s_birth_year, 0) < 0.5 AND NOT h_name THEN {'no': 3, 'kind': 'dates',
                         'evidence': 'column name'} END,
                CASE WHEN p_phone IS NOT NULL AND NOT h_fax THEN {'no': 4, 'kind': 'telephone_numbers',
                         'evidence': 'phone on ' || anon_profile_pct(p_phone) || ' of values'}
                     WHEN h_phone THEN {'no': 4, 'kind': 'telephone_numbers', 'evidence': 'column name'} END,
                CASE WHEN h_fax THEN {'no': 5, 'kind': 'fax_numbers', 'evidence': 'column name'
                         || coalesce(' and phone on ' || anon_profile_pct(p_phone) || ' of values', '')} END,
                CASE WHEN p_email IS NOT NULL THEN {'no': 6, 'kind': 'email_addresses',
                         'evidence': 'email on ' || anon_profile_pct(p_email) || ' of values'}
                     WHEN h_email THEN {'no': 6, 'kind': 'email_addresses', 'evidence': 'column name'} END,
                CASE WHEN p_ssn IS NOT NULL THEN {'no': 7, 'kind': 'social_security_numbers',
                         'evidence': 'us_ssn on ' || anon_profile_pct(p_ssn) || ' of values'}
                     WHEN h_ssn THEN {'no': 7, 'kind': 'social_security_numbers', 'evidence': 'column name'} END,
                CASE WHEN h_mrn THEN {'no': 8, 'kind': 'medical_record_numbers', 'evidence': 'column name'} END,
                CASE WHEN h_health_plan THEN {'no': 9, 'kind': 'health_plan_beneficiary_numbers',
                                              'evidence': 'column name'} END,
                CASE WHEN coalesce(p_iban, p_card) IS NOT NULL THEN {'no': 10, 'kind': 'account_numbers',
                         'evidence': CASE WHEN p_iban IS NOT NULL THEN 'iban' ELSE 'credit_card' END || ' on '
                                     || anon_profile_pct(coalesce(p_iban, p_card)) || ' of values'}
                     WHEN h_account THEN {'no': 10, 'kind': 'account_numbers', 'evidence': 'column name'} END,
                CASE WHEN h_license AND NOT h_vehicle THEN {'no': 11, 'kind': 'certificate_license_numbers',
                                                            'evidence': 'column name'} END,
                CASE WHEN h_vehicle THEN {'no': 12, 'kind': 'vehicle_identifiers', 'evidence': 'column name'} END,
                CASE WHEN h_device THEN {'no': 13, 'kind': 'device_identifiers', 'evidence': 'column name'} END,
                CASE WHEN p_url IS NOT NULL THEN {'no': 14, 'kind': 'web_urls',
                         'evidence': 'url on ' || anon_profile_pct(p_url) || ' of values'}
                     WHEN h_url THEN {'no': 14, 'kind': 'web_urls', 'evidence': 'column name'} END,
                CASE WHEN p_ip IS NOT NULL THEN {'no': 15, 'kind': 'ip_addresses',
                         'evidence': 'ip_address on ' || anon_profile_pct(p_ip) || ' of values'}
                     WHEN h_ip THEN {'no': 15, 'kind': 'ip_addresses', 'evidence': 'column name'} END,
                CASE WHEN h_biometric THEN {'no': 16, 'kind': 'biometric_identifiers', 'evidence': 'column name'} END,
                CASE WHEN h_photo THEN {'no': 17, 'kind': 'full_face_photographs', 'evidence': 'column name'} END
            ], lambda h: h IS NOT NULL) AS __named_kinds
        FROM __anon_judged
    )
    SELECT pos, column_name, column_type, rows, sample_rows,
           CASE WHEN sample_rows > 0 THEN 1 - nonnull / sample_rows END AS null_share,
           CASE WHEN nonnull > 0 THEN distinct_values / nonnull END AS distinct_ratio,
           CASE WHEN nonnull > 0 THEN singles / nonnull END AS unique_share,
           list_filter([
               {'pattern': 'email', 'share': p_email}, {'pattern': 'phone', 'share': p_phone},
               {'pattern': 'us_ssn', 'share': p_ssn}, {'pattern': 'iban', 'share': p_iban},
               {'pattern': 'credit_card', 'share': p_card}, {'pattern': 'ip_address', 'share': p_ip},
               {'pattern': 'url', 'share': p_url}, {'pattern': 'date', 'share': p_date},
               {'pattern': 'date_of_birth', 'share': p_dob}, {'pattern': 'person_name', 'share': p_person},
               {'pattern': 'zip_code', 'share': p_zip}, {'pattern': 'age', 'share': p_age},
               {'pattern': 'sex', 'share': p_sex}, {'pattern': 'free_text', 'share': p_text}
           ], lambda p: p.share IS NOT NULL) AS patterns,
           CASE WHEN direct_pattern OR h_name OR h_phone OR h_fax OR h_email OR h_ssn OR h_mrn OR h_health_plan
                     OR h_account OR h_license OR h_vehicle OR h_device OR h_url OR h_ip OR h_biometric OR h_photo
                     OR h_address OR record_number THEN 'identifier'
                WHEN coalesce(p_date, p_dob, p_zip, p_age, p_sex) IS NOT NULL THEN 'quasi-identifier'
                WHEN h_sensitive THEN 'sensitive'
                WHEN h_birth OR h_age OR h_sex OR h_zip OR h_geo OR h_demographic THEN 'quasi-identifier'
                WHEN p_text IS NOT NULL OR nonnull = 0 THEN 'unknown'
                ELSE 'keep' END AS suggested_role,
           CASE WHEN direct_pattern THEN 'direct identifier pattern'
                WHEN h_name OR h_phone OR h_fax OR h_email OR h_ssn OR h_mrn OR h_health_plan OR h_account
                     OR h_license OR h_vehicle OR h_device OR h_url OR h_ip OR h_biometric OR h_photo OR h_address
                     THEN 'column name says a direct identifier'
                WHEN record_number AND singles = nonnull THEN 'unique per row (record number)'
                WHEN record_number THEN 'column name says an id, many distinct values'
                WHEN coalesce(p_date, p_dob, p_zip, p_age, p_sex) IS NOT NULL THEN 'quasi-identifier pattern'
                WHEN h_sensitive THEN 'column name says sensitive'
                WHEN h_birth OR h_age OR h_sex OR h_zip OR h_geo OR h_demographic
                     THEN 'column name says a demographic'
                WHEN p_text IS NOT NULL THEN 'free text: review by hand'
                WHEN nonnull = 0 THEN 'no non-NULL value in the sample'
                ELSE 'no identifying pattern or name' END AS reason,
           CASE WHEN len(__named_kinds) = 0 AND record_number
                THEN [{'no': 18, 'kind': 'other_unique_identifiers',
                       'evidence': CASE WHEN singles = nonnull THEN 'unique per row'
                                        ELSE 'column name and many distinct values' END}]
                ELSE __named_kinds END AS __hipaa
    FROM __anon_kinds
    CROSS JOIN (SELECT (SELECT count(*) FROM query_table(tbl)) AS rows,
                       (SELECT count(*) FROM __anon_sample) AS sample_rows) AS __anon_n;

-- anon_profile(tbl) -> one row per column of tbl, in table order:
--   column_name VARCHAR, column_type VARCHAR,
--   rows BIGINT              rows of the table,
--   sample_rows BIGINT       rows profiled (a seeded sample of at most 10,000 rows),
--   null_share DOUBLE        share of sampled rows whose value is NULL,
--   distinct_ratio DOUBLE    distinct non-NULL values / non-NULL sampled rows,
--   unique_share DOUBLE      share of non-NULL sampled rows whose value occurs once in the sample,
--   patterns STRUCT(pattern VARCHAR, share DOUBLE)[]
--                            the patterns at least half of the non-NULL values match (see the top of
--                            this file), each with the share of non-NULL values matching it,
--   suggested_role VARCHAR   'identifier' (a direct identifier pattern or name, or a record number:
--                            unique per row), 'quasi-identifier' (dates, ZIP, age, sex, demographics),
--                            'sensitive' (the name says diagnosis, disease, salary, income, ...),
--                            'unknown' (free text, or no value to judge) or 'keep',
--   reason VARCHAR           why that role,
--   hipaa VARCHAR[]          the HIPAA Safe Harbor identifier kinds the column holds (see
--                            anon_safe_harbor).
-- Shares and ratios are NULL when the sample has no (non-NULL) row. No data value is returned.
CREATE OR REPLACE TEMP MACRO anon_profile(tbl) AS TABLE
    SELECT column_name, column_type, rows, sample_rows, null_share, distinct_ratio, unique_share, patterns,
           suggested_role, reason, list_transform(__hipaa, lambda h: h.kind) AS hipaa
    FROM anon_profile_details(tbl)
    ORDER BY pos;

-- anon_safe_harbor(tbl) -> one row per HIPAA Safe Harbor identifier kind the table still contains,
-- in the order of 45 CFR 164.514(b)(2)(i):
--   kind_no INTEGER          1-18, the item (A)-(R) of the rule,
--   kind VARCHAR             names, geographic_subdivisions, dates, telephone_numbers, fax_numbers,
--                            email_addresses, social_security_numbers, medical_record_numbers,
--                            health_plan_beneficiary_numbers, account_numbers,
--                            certificate_license_numbers, vehicle_identifiers, device_identifiers,
--                            web_urls, ip_addresses, biometric_identifiers, full_face_photographs,
--                            other_unique_identifiers,
--   columns VARCHAR[]        the columns holding it, in table order,
--   evidence VARCHAR         per column, what was found ('column name', or a pattern and its share),
--   sample_rows BIGINT       rows profiled.
-- No row: none of the kinds was found (by column name or by the value patterns; see docs/checks.md for
-- what cannot be found this way).
CREATE OR REPLACE TEMP MACRO anon_safe_harbor(tbl) AS TABLE
    SELECT h.no::INTEGER AS kind_no, h.kind AS kind, list(column_name ORDER BY pos) AS columns,
           string_agg(column_name || ': ' || h.evidence, '; ' ORDER BY pos) AS evidence,
           any_value(sample_rows) AS sample_rows
    FROM (SELECT pos, column_name, sample_rows, unnest(__hipaa) AS h FROM anon_profile_details(tbl))
    GROUP BY h.no, h.kind
    ORDER BY kind_no;
