<?php
define('DB_NAME', '${DB_NAME}');
define('DB_HOST', '${DB_HOST}');
// php ${PHP_VERSION}
